//! Restoring a session snapshot against re-reading the conversation through prefill
//! (`pocketrt::session`, `Session::save` / `restore`), on the fast CPU backend and the GPU
//! (lavapipe here): a history of `-t` tokens is prefilled and its first token chosen
//! (what a reloaded tab without snapshots pays), saved, then restored and its first token
//! chosen (the GPU's row upload completes in that step's submit); and a reply of `-r`
//! tokens, whose save appends only its rows. Prints one JSON object per backend.
//!
//! The model has the Pocket-0.3B shape (`synth`) with a byte-level vocabulary, so that a
//! session's tokenizer covers it: the KV rows per position and the prefill's matrices are
//! Pocket's (the LM head runs once per prefill, so its smaller vocabulary is ~nothing).
//!
//! Run: `cargo bench --bench session_restore -- [-t TOKENS] [-r REPLY] [--backend
//! cpu|gpu|both]` (default 4,000 tokens, a 100-token reply, both). Without `--bench`
//! (the test run's smoke) the tiny preset, 64 tokens, a 4-token reply.

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::generate::{GenerateOptions, Session};
use pocketrt::session::RestoreOptions;
use pocketrt::synth::{preset, SynthSource};
use pocketrt::tokenizer::{byte_level_json, Tokenizer};
use std::time::Instant;

struct Args {
    tokens: usize,
    reply: usize,
    backends: Vec<Backend>,
    preset: &'static str,
}

fn parse() -> Result<Args, String> {
    let bench = std::env::args().any(|s| s == "--bench");
    let mut a = Args {
        tokens: if bench { 4000 } else { 64 },
        reply: if bench { 100 } else { 4 },
        backends: vec![Backend::Cpu, Backend::Gpu],
        preset: if bench { "pocket-0.3b" } else { "tiny-qwen3" },
    };
    if !bench {
        a.backends = vec![Backend::Cpu];
    }
    let mut it = std::env::args().skip(1).filter(|s| s != "--bench");
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "-t" => a.tokens = value()?.parse().map_err(|_| "-t needs a number")?,
            "-r" => a.reply = value()?.parse().map_err(|_| "-r needs a number")?,
            "--backend" => {
                a.backends = match value()?.as_str() {
                    "cpu" => vec![Backend::Cpu],
                    "gpu" => vec![Backend::Gpu],
                    "both" => vec![Backend::Cpu, Backend::Gpu],
                    other => return Err(format!("--backend {other}: cpu, gpu or both")),
                }
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if a.tokens < 2 || a.reply == 0 {
        return Err(
            "usage: session_restore [-t TOKENS ≥ 2] [-r REPLY ≥ 1] [--backend cpu|gpu|both]".into(),
        );
    }
    Ok(a)
}

fn session(a: &Args, backend: Backend) -> pocketrt::Result<Session> {
    let tokenizer = Tokenizer::from_hf_json(&byte_level_json(&["<|endoftext|>"]))?;
    let mut config = preset(a.preset)?;
    config.vocab_size = tokenizer.vocab_size();
    config.max_context = config.max_context.max(a.tokens + a.reply + 32);
    let mut src = SynthSource::new(config, 3)?;
    let engine = Engine::load(&mut src, backend, WeightMode::Q4, a.tokens + a.reply + 32)?;
    Ok(Session::new(engine, tokenizer, None))
}

fn greedy(n: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens: n,
        ..Default::default()
    }
}

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

fn run(a: &Args, backend: Backend) -> pocketrt::Result<serde_json::Value> {
    let mut s = session(a, backend)?;
    let history: Vec<u32> = (0..a.tokens as u64)
        .map(|i| (i * 2_654_435_761 % 256) as u32)
        .collect();
    let path = std::env::temp_dir().join(format!("pocketrt-bench-{}.snap", std::process::id()));
    let t = Instant::now();
    s.generate(&history, &greedy(1), |_| true)?;
    let prefill_s = secs(t);
    let saved = s.save(&path)?;
    // A reply, then its save (an append of its positions).
    let mut turn = s.cached().to_vec();
    turn.extend(b"Go on.".iter().map(|&b| b as u32));
    let t = Instant::now();
    s.generate(&turn, &greedy(a.reply), |_| true)?;
    let reply_s = secs(t);
    let reply = s.save(&path)?;
    // The next turn's first token after the saved state, uninterrupted…
    let mut next = s.cached().to_vec();
    next.extend(b"More.".iter().map(|&b| b as u32));
    let want = s.generate(&next, &greedy(4), |_| true)?.0;
    // …and after a restore (the cache holds more by now: the restore replaces it).
    let t = Instant::now();
    let restored = s.restore(&path, RestoreOptions::default())?;
    let restore_s = secs(t);
    let (got, stats) = s.generate(&next, &greedy(4), |_| true)?;
    let restore_first_token_s = restore_s + stats.prompt_seconds;
    std::fs::remove_file(&path).ok();
    let per = s.engine().kv_layout().bytes_per_position();
    Ok(serde_json::json!({
        "backend": s.engine().description(),
        "rows": s.engine().kv_rows_tag(),
        "history_tokens": a.tokens,
        "prefill_first_token_s": prefill_s,
        "restore_s": restore_s,
        "restore_first_token_s": restore_first_token_s,
        "speedup": prefill_s / restore_first_token_s,
        "restored_tokens": restored.restored,
        "continuation_equal": got == want,
        "bytes_per_position": per,
        "first_save_s": saved.seconds,
        "first_save_bytes": saved.bytes_written,
        "reply_tokens": a.reply,
        "reply_generate_s": reply_s,
        "reply_save_s": reply.seconds,
        "reply_save_bytes": reply.bytes_written,
        "reply_save_positions": reply.positions,
        "file_bytes": reply.file_bytes,
    }))
}

fn main() {
    let a = parse().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    for &backend in &a.backends {
        match run(&a, backend) {
            Ok(v) => println!("{v}"),
            Err(e) => {
                eprintln!("session_restore ({backend:?}): {e}");
                std::process::exit(1)
            }
        }
    }
}
