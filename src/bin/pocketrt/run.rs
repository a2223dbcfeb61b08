//! `pocketrt run`: generate text from a prompt, streamed to stdout; speeds to stderr.

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{self, Engine};
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
    /// wgpu: Vulkan, Metal or DX12 (lavapipe on machines without a GPU).
    Gpu,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Weights {
    /// Q4 g64, as the GPU runs them (kept bit-exactly from packages and Q4_1-pair GGUFs).
    Q4,
    /// f32 (quantized sources dequantized): the exact reference (CPU backend only).
    F32,
}

pub struct RunArgs<'a> {
    pub model: &'a Path,
    pub prompt: &'a str,
    pub max_tokens: usize,
    pub chat: bool,
    pub backend: Backend,
    pub weights: Weights,
    pub verbose: bool,
}

pub fn run(a: RunArgs) -> Result<()> {
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
    let cfg = src.config().clone();
    let context = prompt.len() + a.max_tokens;
    if context > cfg.max_context {
        return Err(Error::InvalidArgument(format!(
            "prompt ({} tokens) + {} new tokens exceeds the model's context of {}",
            prompt.len(),
            a.max_tokens,
            cfg.max_context
        )));
    }
    let backend = match a.backend {
        Backend::Cpu => engine::Backend::Cpu,
        Backend::Gpu => engine::Backend::Gpu,
    };
    let weights = match a.weights {
        Weights::Q4 => WeightMode::Q4,
        Weights::F32 => WeightMode::F32,
    };
    let mut engine = Engine::load(src.as_mut(), backend, weights, context)?;
    let mut eos: Vec<u32> = cfg.eos_token_ids.clone();
    eos.extend_from_slice(tok.eos_ids());
    let load_s = t_load.elapsed().as_secs_f64();
    if a.verbose {
        eprintln!("backend: {}", engine.description());
    }

    let mut out = std::io::stdout().lock();
    let mut stream = StreamDecoder::new(true);
    let mut stream_err = None;
    let t_start = Instant::now();
    let mut t_first = None;
    let generated = engine.greedy(&prompt, a.max_tokens, |next| {
        t_first.get_or_insert_with(Instant::now);
        if eos.contains(&next) {
            return false;
        }
        match stream.push(&tok, next) {
            Ok(piece) => {
                write!(out, "{piece}").and_then(|_| out.flush()).ok();
                true
            }
            Err(e) => {
                stream_err = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = stream_err {
        return Err(e);
    }
    writeln!(out, "{}", stream.flush()).ok();
    let t_first = t_first.unwrap_or_else(Instant::now);
    let prompt_s = (t_first - t_start).as_secs_f64();
    let gen_s = t_first.elapsed().as_secs_f64();
    let decoded = generated.len().saturating_sub(1);
    eprintln!(
        "load {load_s:.2} s | prompt {} tokens, {:.1} tok/s | generated {} tokens, {:.1} tok/s | {}",
        prompt.len(),
        prompt.len() as f64 / prompt_s.max(1e-9),
        generated.len(),
        decoded as f64 / gen_s.max(1e-9),
        engine.description(),
    );
    Ok(())
}
