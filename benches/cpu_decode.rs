//! Decode speed of the fast CPU backend (`cpu::fast`): greedy tok/s, one token at a time
//! as `pocketrt run` decodes, in both input precisions (int8, the default, and f32), on
//! rayon's threads (set RAYON_NUM_THREADS). Prints one JSON object.
//!
//! Run: `cargo bench --bench cpu_decode -- [MODEL] [-n TOKENS] [-p PROMPT] [-r REPS]`. MODEL
//! is anything `pocketrt run` opens (default: `synth:pocket-0.3b`, generated in memory);
//! the benchmark model is the synthetic Pocket-shape
//! GGUF (`pocketrt synth --preset pocket-0.3b --gguf`). scripts/bench-cpu-vs-llama runs
//! this next to llama.cpp's CPU engine on the same GGUF.

use pocketrt::cpu::fast::{FastModel, Precision};
use pocketrt::cpu::ops::argmax;
use pocketrt::format;
use std::time::Instant;

struct Args {
    model: String,
    tokens: usize,
    prompt: usize,
    reps: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        model: String::new(),
        tokens: 64,
        prompt: 8,
        reps: 3,
    };
    let mut it = std::env::args().skip(1).filter(|s| s != "--bench");
    while let Some(arg) = it.next() {
        let mut num = |what: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{what} needs a number"))
        };
        match arg.as_str() {
            "-n" => a.tokens = num("-n")?,
            "-p" => a.prompt = num("-p")?,
            "-r" => a.reps = num("-r")?,
            _ if a.model.is_empty() => a.model = arg,
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if a.tokens == 0 || a.reps == 0 {
        return Err("usage: cpu_decode [MODEL] [-n TOKENS] [-p PROMPT] [-r REPS]".into());
    }
    if a.model.is_empty() {
        // No model: the synthetic Pocket-shape model under `cargo bench`; a tiny one when
        // `cargo test --all-targets` runs this as a smoke test (no `--bench` flag).
        let bench = std::env::args().any(|s| s == "--bench");
        a.model = if bench {
            "synth:pocket-0.3b"
        } else {
            "synth:tiny-qwen3"
        }
        .into();
    }
    Ok(a)
}

/// tok/s of each repetition: `prompt` fed tokens, then `tokens` timed greedy steps.
fn run(model: &FastModel, a: &Args) -> pocketrt::Result<Vec<f64>> {
    let vocab = model.config.vocab_size as u64;
    (0..a.reps)
        .map(|_| {
            let mut cache = model.new_cache(a.prompt + a.tokens + 1)?;
            let mut token = 1;
            for i in 0..a.prompt {
                token = ((i as u64 * 2_654_435_761) % vocab) as u32;
                model.forward(token, &mut cache)?;
            }
            let t = Instant::now();
            for _ in 0..a.tokens {
                let logits = model.forward(token, &mut cache)?;
                token = argmax(&logits).unwrap_or(0) as u32;
            }
            Ok(a.tokens as f64 / t.elapsed().as_secs_f64())
        })
        .collect()
}

/// A model file, or `synth:PRESET` for a seeded random model of a preset's shapes.
fn open(model: &str) -> pocketrt::Result<Box<dyn pocketrt::format::ModelSource>> {
    match model.strip_prefix("synth:") {
        Some(preset) => Ok(Box::new(pocketrt::synth::SynthSource::preset(preset, 1)?)),
        None => format::open(std::path::Path::new(model)),
    }
}

fn main() {
    let a = parse().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut report = serde_json::json!({ "model": a.model, "tokens": a.tokens,
        "prompt": a.prompt, "reps": a.reps });
    for precision in [Precision::Int8, Precision::F32] {
        let t = Instant::now();
        let model = open(&a.model)
            .and_then(|mut src| FastModel::load(src.as_mut(), precision))
            .unwrap_or_else(|e| {
                eprintln!("{}: {e}", a.model);
                std::process::exit(1)
            });
        let load_s = t.elapsed().as_secs_f64();
        let tok_s = run(&model, &a).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        let best = tok_s.iter().copied().fold(0.0, f64::max);
        eprintln!("{}: best {best:.1} tok/s {tok_s:.1?}", model.describe());
        report[precision.name()] = serde_json::json!({
            "backend": model.describe(), "load_s": load_s, "tok_s": tok_s, "tok_s_best": best,
        });
    }
    println!("{report:#}");
}
