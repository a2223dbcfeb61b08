//! The browser tests' models (scripts/test-web): `web_fixture DIR LARGE_DIR` writes
//! - DIR: a tiny qwen3 package (20 KiB shards, a byte-level tokenizer, a chat template)
//!   and `expected.json` with the native engine's greedy tokens for a prompt (on the GPU,
//!   and on the fast CPU backend: `cpu_tokens`);
//! - LARGE_DIR: a random package of MNN-Pocket-0.3B's shapes (≈ 170 MB) for the
//!   memory test, with `bench-tokenizer.json` (every id decodes) for the decode bench.

use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::synth::{write_package, SynthSource};
use pocketrt::tokenizer::{byte_level_json, Tokenizer};
use std::path::Path;

const TEMPLATE: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}\
<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const PROMPT: &str = "Hello, pocket!";
const TOKENS: usize = 12;
const BENCH_TOKENIZER: &str = "bench-tokenizer.json";

/// Byte tokens, the chat specials, then placeholders up to `vocab`, so every id the model
/// can produce decodes.
fn tokenizer_json(vocab: usize) -> String {
    let mut names: Vec<String> = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
        .map(String::from)
        .to_vec();
    names.extend((256 + names.len()..vocab).map(|i| format!("<|extra_{i}|>")));
    let specials: Vec<&str> = names.iter().map(String::as_str).collect();
    byte_level_json(&specials)
}

fn main() -> pocketrt::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, large] = args.as_slice() else {
        eprintln!("usage: web_fixture DIR LARGE_DIR");
        std::process::exit(2);
    };
    let config = pocketrt::synth::preset("tiny-qwen3")?;
    let json = tokenizer_json(config.vocab_size);
    let mut tiny = SynthSource::preset("tiny-qwen3", 7)?
        .with_tokenizer(json.clone(), Some(TEMPLATE.to_string()));
    let opts = ConvertOptions {
        shard_bytes: Some(20 << 10),
        ..Default::default()
    };
    convert(&mut tiny, Path::new(dir), &opts, &mut |_| {})?;

    // The native engine's greedy continuations (GPU and fast CPU backend), up to the
    // first end-of-sequence token.
    let tok = Tokenizer::from_hf_json(&json)?;
    let prompt_ids = tok.encode(PROMPT, true);
    let greedy = |backend| -> pocketrt::Result<(Vec<u32>, String)> {
        let mut src = pocketrt::format::open(Path::new(dir))?;
        let mut eos = src.config().eos_token_ids.clone();
        eos.extend_from_slice(tok.eos_ids());
        let mut engine = Engine::load(src.as_mut(), backend, WeightMode::Q4, 64)?;
        let mut tokens = engine.greedy(&prompt_ids, TOKENS, |_| true)?;
        if let Some(end) = tokens.iter().position(|t| eos.contains(t)) {
            tokens.truncate(end);
        }
        Ok((tokens, engine.description().to_string()))
    };
    let (tokens, engine) = greedy(Backend::Gpu)?;
    let (cpu_tokens, cpu_engine) = greedy(Backend::Cpu)?;
    let expected = serde_json::json!({
        "prompt": PROMPT, "prompt_ids": prompt_ids, "tokens": tokens, "engine": engine,
        "cpu_tokens": cpu_tokens, "cpu_engine": cpu_engine,
    });
    std::fs::write(Path::new(dir).join("expected.json"), expected.to_string())
        .map_err(|e| pocketrt::Error::io(dir, e))?;

    // Every id decodes here too (the browser decode bench generates text from it).
    let mut big = SynthSource::preset("pocket-0.3b", 1)?.with_tokenizer(byte_level_json(&[]), None);
    write_package(&mut big, Path::new(large))?;
    // A tokenizer in which every id decodes, for the browser decode bench (which serves
    // the package with it; the memory test keeps the small one: 65,536 entries cost
    // ~64 MB of wasm memory).
    let vocab = pocketrt::synth::preset("pocket-0.3b")?.vocab_size;
    std::fs::write(
        Path::new(large).join(BENCH_TOKENIZER),
        tokenizer_json(vocab),
    )
    .map_err(|e| pocketrt::Error::io(large, e))?;
    Ok(())
}
