//! `pocketrt run`: generate text from a prompt, streamed to stdout; speeds to stderr.

use pocketrt::cpu::{Model, WeightMode};
use pocketrt::format;
use pocketrt::tokenizer::{ChatOptions, ChatTemplate, Message, StreamDecoder, Tokenizer};
use pocketrt::{Error, Result};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Backend {
    /// The plain-Rust reference forward pass.
    Cpu,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Weights {
    /// Q4 g64, as the GPU runs them (kept bit-exactly from packages and Q4_1-pair GGUFs).
    Q4,
    /// f32 (quantized sources dequantized): the exact reference.
    F32,
}

pub struct RunArgs<'a> {
    pub model: &'a Path,
    pub prompt: &'a str,
    pub max_tokens: usize,
    pub chat: bool,
    pub backend: Backend,
    pub weights: Weights,
}

pub fn run(a: RunArgs) -> Result<()> {
    let Backend::Cpu = a.backend;
    let t_load = Instant::now();
    let mut src = format::open(a.model)?;
    let json = src
        .tokenizer_json()?
        .ok_or_else(|| Error::Tokenizer(format!("{} has no tokenizer", a.model.display())))?;
    let tok = Tokenizer::from_hf_json(&json)?;
    let text = if a.chat {
        let template = src.chat_template().ok_or_else(|| {
            Error::ChatTemplate(format!("{} has no chat template", a.model.display()))
        })?;
        let opts = ChatOptions {
            add_generation_prompt: true,
            enable_thinking: Some(false),
            ..Default::default()
        };
        ChatTemplate::new(&template)?.render(&[Message::user(a.prompt)], &opts)?
    } else {
        a.prompt.to_string()
    };
    let prompt = tok.encode(&text, true);
    if prompt.is_empty() {
        return Err(Error::InvalidArgument("the prompt is empty".into()));
    }
    let mode = match a.weights {
        Weights::Q4 => WeightMode::Q4,
        Weights::F32 => WeightMode::F32,
    };
    let model = Model::load(src.as_mut(), mode)?;
    let cfg = src.config();
    let total = prompt.len() + a.max_tokens;
    if total > cfg.max_context {
        return Err(Error::InvalidArgument(format!(
            "prompt ({} tokens) + {} new tokens exceeds the model's context of {}",
            prompt.len(),
            a.max_tokens,
            cfg.max_context
        )));
    }
    let mut eos: Vec<u32> = cfg.eos_token_ids.clone();
    eos.extend_from_slice(tok.eos_ids());
    let load_s = t_load.elapsed().as_secs_f64();

    let mut cache = model.new_cache(total)?;
    let t_prompt = Instant::now();
    let mut logits = Vec::new();
    for &t in &prompt {
        logits = model.forward(t, &mut cache)?;
    }
    let prompt_s = t_prompt.elapsed().as_secs_f64();

    let t_gen = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut stream = StreamDecoder::new(true);
    let mut generated = 0;
    while generated < a.max_tokens {
        let next = pocketrt::cpu::ops::argmax(&logits)
            .ok_or_else(|| Error::InvalidArgument("the logits are all NaN".into()))?
            as u32;
        generated += 1;
        if eos.contains(&next) {
            break;
        }
        write!(out, "{}", stream.push(&tok, next)?)
            .and_then(|_| out.flush())
            .ok();
        if generated < a.max_tokens {
            logits = model.forward(next, &mut cache)?;
        }
    }
    writeln!(out, "{}", stream.flush()).ok();
    let gen_s = t_gen.elapsed().as_secs_f64();
    eprintln!(
        "load {load_s:.2} s | prompt {} tokens, {:.1} tok/s | generated {generated} tokens, {:.1} tok/s (backend cpu)",
        prompt.len(),
        prompt.len() as f64 / prompt_s.max(1e-9),
        generated as f64 / gen_s.max(1e-9),
    );
    Ok(())
}
