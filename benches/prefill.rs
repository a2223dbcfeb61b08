//! Prefill and long-context decode on the GPU engine. Prints one JSON object:
//! - prefill tok/s at each prompt length (`GpuModel::prefill` from position 0, wall time
//!   including the last position's logits readback);
//! - decode tok/s at each context (greedy steps at positions c, c + 1, …: a step's cost
//!   depends on its position, not on what the cache holds, so no prompt is run first);
//! - at the ratio length (1,024 by default): prefill's per-token time against token-by-token
//!   processing of the same prompt, timed over a sample of decode steps at positions spread
//!   evenly over 0..length (their mean is the prompt's mean per-token time). The issue asks
//!   for ≥ 10×.
//! - speculative decoding's verification step (`GpuModel::verify_argmax`, `verify_logits`)
//!   of k positions after a short prompt: ms per step (mean of `-n` steps, each waiting for
//!   its readback) against one greedy decode step there, and where batched prefill pays
//!   (`GpuModel::prefill_pays`) a batched prefill of the same k tokens (`prefill`: one
//!   chunk and the last row's logits) for comparison.
//!
//! Run: `cargo bench --bench prefill -- [MODEL] [-p 128,1024,4096] [-c 0,4096,32768]
//! [-n STEPS] [--ratio 1024] [-k 1,2,4,8]`. MODEL: a package, a GGUF or `synth:NAME` (default: the
//! shared /tmp/pocket-synth when present, else `synth:pocket-0.3b`, generated in memory).
//! Without `--bench` (`cargo test --all-targets`) it runs a tiny smoke version.

use pocketrt::format;
use pocketrt::gpu::weights::limits_needed;
use pocketrt::gpu::{GpuModel, ProfiledContext};
use std::sync::Arc;
use std::time::Instant;

struct Args {
    model: String,
    prefill: Vec<usize>,
    contexts: Vec<usize>,
    steps: usize,
    ratio: usize,
    /// Positions per verification step.
    verify: Vec<usize>,
}

fn list(v: Option<String>, what: &str) -> Result<Vec<usize>, String> {
    v.ok_or(())
        .and_then(|s| s.split(',').map(|x| x.parse().map_err(|_| ())).collect())
        .map_err(|_| format!("{what} needs a comma-separated list of numbers"))
}

fn parse() -> Result<Args, String> {
    let bench = std::env::args().any(|s| s == "--bench");
    let mut a = if bench {
        Args {
            model: String::new(),
            prefill: vec![128, 1024, 4096],
            contexts: vec![0, 4096, 32_768],
            steps: 8,
            ratio: 1024,
            verify: vec![1, 2, 4, 8],
        }
    } else {
        // Smoke run under `cargo test --all-targets`: a tiny model, short lengths.
        Args {
            model: "synth:tiny-qwen3".into(),
            prefill: vec![16, 300],
            contexts: vec![0, 100],
            steps: 2,
            ratio: 64,
            verify: vec![1, 3],
        }
    };
    let mut it = std::env::args().skip(1).filter(|s| s != "--bench");
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-p" => a.prefill = list(it.next(), "-p")?,
            "-c" => a.contexts = list(it.next(), "-c")?,
            "-n" => a.steps = list(it.next(), "-n")?.first().copied().unwrap_or(0),
            "--ratio" => a.ratio = list(it.next(), "--ratio")?.first().copied().unwrap_or(0),
            "-k" => a.verify = list(it.next(), "-k")?,
            _ if a.model.is_empty() || !arg.starts_with('-') => a.model = arg,
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if a.steps == 0 || a.ratio == 0 || a.prefill.contains(&0) || a.verify.contains(&0) {
        return Err("prefill lengths, -n, --ratio and -k must be positive".into());
    }
    if a.model.is_empty() {
        let shared = std::path::Path::new("/tmp/pocket-synth/manifest.json");
        a.model = if shared.exists() {
            "/tmp/pocket-synth".into()
        } else {
            "synth:pocket-0.3b".into()
        };
    }
    Ok(a)
}

fn prompt(n: usize, vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i as u64 * 2_654_435_761) % vocab as u64) as u32)
        .collect()
}

/// Seconds of greedy decode steps at `positions` (each waits for its token).
fn decode_seconds(m: &mut GpuModel, positions: &[usize]) -> pocketrt::Result<f64> {
    let mut token = 1;
    let t = Instant::now();
    for &pos in positions {
        token = m.decode(token, pos)?;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Milliseconds per call of `run` (mean of `steps` calls, each waiting for its readback).
fn ms_per_step(
    steps: usize,
    mut run: impl FnMut() -> pocketrt::Result<()>,
) -> pocketrt::Result<f64> {
    let t = Instant::now();
    for _ in 0..steps {
        run()?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e3 / steps as f64)
}

/// The verification step of each of `ks` positions at position `at` against a decode step
/// there and a batched prefill of the same tokens.
fn verify_report(
    m: &mut GpuModel,
    ks: &[usize],
    at: usize,
    steps: usize,
) -> pocketrt::Result<Vec<serde_json::Value>> {
    let (vocab, context) = (m.config.vocab_size, m.context);
    let decode_ms = ms_per_step(steps, || m.decode(1, at).map(drop))?;
    let mut out = vec![];
    for &k in ks.iter().filter(|k| at + **k <= context) {
        let tokens = prompt(k, vocab);
        m.verify_argmax(&tokens, at)?;
        let argmax_ms = ms_per_step(steps, || m.verify_argmax(&tokens, at).map(drop))?;
        m.verify_logits(&tokens, at)?;
        let logits_ms = ms_per_step(steps, || m.verify_logits(&tokens, at).map(drop))?;
        // Only where batched prefill is the profile's choice (elsewhere it is slower than
        // decode steps by design).
        let prefill_ms = match m.prefill_pays() {
            true => Some(ms_per_step(steps, || m.prefill(&tokens, at).map(drop))?),
            false => None,
        };
        eprintln!(
            "verify {k} at {at}: {argmax_ms:.2} ms (argmax), {logits_ms:.2} ms (logits); \
             decode step {decode_ms:.2} ms; batched prefill {prefill_ms:.2?} ms"
        );
        out.push(serde_json::json!({
            "k": k,
            "position": at,
            "argmax_ms": argmax_ms,
            "logits_ms": logits_ms,
            "decode_step_ms": decode_ms,
            "argmax_vs_decode_step": argmax_ms / decode_ms,
            "batched_prefill_ms": prefill_ms,
        }));
    }
    Ok(out)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse()?;
    let mut src: Box<dyn format::ModelSource> = match a.model.strip_prefix("synth:") {
        Some(preset) => Box::new(pocketrt::synth::SynthSource::preset(preset, 1)?),
        None => format::open(std::path::Path::new(&a.model))?,
    };
    let cfg = src.config().clone();
    let longest_prefill = a.prefill.iter().copied().max().unwrap_or(0);
    let longest_decode = a.contexts.iter().copied().max().unwrap_or(0) + a.steps;
    let context = longest_prefill
        .max(longest_decode)
        .max(a.ratio)
        .min(cfg.max_context);
    let t = Instant::now();
    let ctx = ProfiledContext::open_blocking(limits_needed(&cfg, context, false))?;
    let mut m = GpuModel::load(Arc::new(ctx), src.as_mut(), context)?;
    let load_s = t.elapsed().as_secs_f64();
    let vocab = cfg.vocab_size;
    // Warm-up: pipelines and first-use costs out of the timings.
    m.prefill(&prompt(8.min(context), vocab), 0)?;
    decode_seconds(&mut m, &[0])?;

    let mut prefill = vec![];
    for &n in a.prefill.iter().filter(|n| **n <= context) {
        let tokens = prompt(n, vocab);
        let t = Instant::now();
        m.prefill(&tokens, 0)?;
        let s = t.elapsed().as_secs_f64();
        prefill.push(serde_json::json!({"tokens": n, "seconds": s, "tok_s": n as f64 / s}));
        eprintln!("prefill {n}: {:.1} tok/s", n as f64 / s);
    }
    let mut decode = vec![];
    for &c in &a.contexts {
        let positions: Vec<usize> = (c..c + a.steps).filter(|p| *p < context).collect();
        if positions.is_empty() {
            continue;
        }
        let s = decode_seconds(&mut m, &positions)?;
        let tok_s = positions.len() as f64 / s;
        decode.push(serde_json::json!({"context": c, "steps": positions.len(), "tok_s": tok_s}));
        eprintln!("decode at {c}: {tok_s:.2} tok/s");
    }

    // Prefill against token-by-token processing of the same prompt length.
    let n = a.ratio.min(context);
    let tokens = prompt(n, vocab);
    let t = Instant::now();
    m.prefill(&tokens, 0)?;
    let prefill_per_token = t.elapsed().as_secs_f64() / n as f64;
    let sample: Vec<usize> = (0..a.steps)
        .map(|i| i * n / a.steps + n / (2 * a.steps))
        .collect();
    let step_per_token = decode_seconds(&mut m, &sample)? / sample.len() as f64;
    let ratio = step_per_token / prefill_per_token;
    eprintln!("prefill vs token by token at {n}: {ratio:.1}×");
    let verify = verify_report(&mut m, &a.verify, 64.min(context / 2), a.steps)?;

    let report = serde_json::json!({
        "model": a.model,
        "adapter": format!("{} ({})", m.gpu_context().adapter.name, m.gpu_context().adapter.backend),
        "context": context,
        "load_s": load_s,
        "prefill_chunk": m.prefill_chunk_len(),
        "prefill": prefill,
        "decode": decode,
        "prefill_vs_token_by_token": {
            "tokens": n,
            "prefill_ms_per_token": prefill_per_token * 1e3,
            "token_by_token_ms_per_token": step_per_token * 1e3,
            "sampled_steps": sample.len(),
            "speedup": ratio,
            "target": 10.0,
        },
        "verify": verify,
        "timing": "wall clock, one run (ratios within the run are what to compare)",
    });
    println!("{report:#}");
    Ok(())
}
