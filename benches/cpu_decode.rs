//! Decode speed of the fast CPU backend (`cpu::fast`): greedy tok/s, one token at a time
//! as `pocketrt run` decodes, in both input precisions (int8, the default, and f32), on
//! rayon's threads (set RAYON_NUM_THREADS), on the kernel the load chose by timing; then
//! in int8 on each SIMD kernel this CPU has (the CPUID order's best first), decode again
//! and prompt tok/s of batched prefill (`FastModel::prefill` from position 0 with the last
//! position's logits, as llama.cpp's pp) at each `--prefill` length;
//! and per kernel, on the calling thread, the int8 GEMV of a 2,560 × 896 matrix (Pocket's
//! gate/up shape) and its 4-token tile (`Kernel::tile`, prefill's product) per token.
//! Prints one JSON object.
//!
//! Run: `cargo bench --bench cpu_decode -- [MODEL] [-n TOKENS] [-p PROMPT] [-r REPS]
//! [--prefill 512,1024] [--weights q4|q8|keep]` (`--prefill 0`: none; weights as
//! `pocketrt run --weights`, default q4). MODEL
//! is anything `pocketrt run` opens (default: `synth:pocket-0.3b`, generated in memory);
//! the benchmark model is the synthetic Pocket-shape
//! GGUF (`pocketrt synth --preset pocket-0.3b --gguf`). scripts/bench-cpu-vs-llama runs
//! this next to llama.cpp's CPU engine on the same GGUF.

use pocketrt::cpu::fast::{
    time_kernels, FastModel, Kernel, Logits, Precision, Rows, PREFILL_CHUNK, TILE,
};
use pocketrt::cpu::ops::argmax;
use pocketrt::format;
use pocketrt::quant::WeightFormat;
use std::time::Instant;

struct Args {
    model: String,
    tokens: usize,
    prompt: usize,
    reps: usize,
    prefill: Vec<usize>,
    weights: WeightFormat,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        model: String::new(),
        tokens: 64,
        prompt: 8,
        reps: 3,
        prefill: vec![],
        weights: WeightFormat::Q4,
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
            "--prefill" => {
                a.prefill = it
                    .next()
                    .and_then(|v| v.split(',').map(|n| n.parse().ok()).collect())
                    .ok_or("--prefill needs a comma-separated list of numbers")?;
                a.prefill.retain(|&n| n > 0);
            }
            "--weights" => {
                let name = it.next().ok_or("--weights needs q4, q8 or keep")?;
                a.weights = name.parse().map_err(|e| format!("--weights: {e}"))?;
            }
            _ if a.model.is_empty() => a.model = arg,
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if a.tokens == 0 || a.reps == 0 {
        return Err(
            "usage: cpu_decode [MODEL] [-n TOKENS] [-p PROMPT] [-r REPS] [--prefill N,N]".into(),
        );
    }
    let bench = std::env::args().any(|s| s == "--bench");
    if !std::env::args().any(|s| s == "--prefill") {
        a.prefill = if bench { vec![512, 1024] } else { vec![20] };
    }
    if a.model.is_empty() {
        // No model: the synthetic Pocket-shape model under `cargo bench`; a tiny one when
        // `cargo test --all-targets` runs this as a smoke test (no `--bench` flag).
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

/// Prompt tok/s of each repetition: a prefill of `n` tokens from position 0.
fn prefill(model: &FastModel, n: usize, reps: usize) -> pocketrt::Result<Vec<f64>> {
    let vocab = model.config.vocab_size as u64;
    let tokens: Vec<u32> = (0..n as u64)
        .map(|i| (i * 2_654_435_761 % vocab) as u32)
        .collect();
    let mut cache = model.new_cache(n)?;
    (0..reps)
        .map(|_| {
            cache.clear();
            let t = Instant::now();
            model.prefill(&tokens, &mut cache, Logits::Last)?;
            Ok(n as f64 / t.elapsed().as_secs_f64())
        })
        .collect()
}

/// Microseconds per token of the int8 product of a 2,560 × 896 Q4 matrix on each SIMD
/// kernel, on this thread: the GEMV (one token) and the `TILE`-token tile; the best of
/// `reps` rounds, the kernels alternating within each round (this machine's load varies):
/// `time_kernels`, which the fast model's kernel choice at load runs on its own matrix.
fn kernel_figures(reps: usize) -> serde_json::Value {
    let (rows, cols) = (2560, 896);
    let mut rng = pocketrt::synth::Rng::new(3);
    let data: Vec<f32> = (0..rows * cols).map(|_| rng.unit() * 0.05).collect();
    let w = pocketrt::quant::Q4Tensor::quantize(&data, rows, cols).expect("a Q4 matrix");
    let kernels: Vec<Kernel> = Kernel::available()
        .into_iter()
        .filter(|k| *k != Kernel::Scalar)
        .collect();
    let figures: Vec<_> = time_kernels(&kernels, Rows::from(&w), reps.max(4), 100)
        .into_iter()
        .map(|t| {
            let (gemv, tile) = (t.gemv_us, t.tile_us_per_token);
            eprintln!(
                "{} 2560×896: GEMV {gemv:.1} µs, {TILE}-token tile {tile:.1} µs per token",
                t.kernel.name()
            );
            serde_json::json!({"kernel": t.kernel.name(), "gemv_us": gemv, "tile_us_per_token": tile})
        })
        .collect();
    serde_json::json!({"rows": rows, "cols": cols, "threads": 1, "runs": figures})
}

/// The runs' tok/s and the best of them; an error ends the bench.
fn best_of(runs: pocketrt::Result<Vec<f64>>) -> (Vec<f64>, f64) {
    let tok_s = runs.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let best = tok_s.iter().copied().fold(0.0, f64::max);
    (tok_s, best)
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
        "prompt": a.prompt, "reps": a.reps, "weights": a.weights.name() });
    for precision in [Precision::Int8, Precision::F32] {
        let t = Instant::now();
        let model = open(&a.model)
            .and_then(|mut src| FastModel::load_as(src.as_mut(), precision, a.weights))
            .unwrap_or_else(|e| {
                eprintln!("{}: {e}", a.model);
                std::process::exit(1)
            });
        let load_s = t.elapsed().as_secs_f64();
        let (tok_s, best) = best_of(run(&model, &a));
        eprintln!("{}: best {best:.1} tok/s {tok_s:.1?}", model.describe());
        report[precision.name()] = serde_json::json!({
            "backend": model.describe(), "load_s": load_s, "tok_s": tok_s, "tok_s_best": best,
        });
        if precision != Precision::Int8 {
            continue;
        }
        let mut prefills = vec![];
        // Every SIMD kernel this CPU has (the load chose one by timing: `backend` says which).
        let kernels = Kernel::available()
            .into_iter()
            .filter(|k| *k != Kernel::Scalar);
        let chosen = model.kernel();
        let mut model = model;
        let mut decodes = vec![];
        for kernel in kernels.rev() {
            model = model.with_kernel(kernel);
            // Decode on every kernel too: whether the timed choice at load was the fastest.
            let (tok_s, best) = best_of(run(&model, &a));
            eprintln!(
                "decode on {}: best {best:.1} tok/s {tok_s:.1?}",
                kernel.name()
            );
            decodes.push(serde_json::json!({"kernel": kernel.name(), "tok_s": tok_s,
                "tok_s_best": best}));
            for &n in &a.prefill {
                let (tok_s, best) = best_of(prefill(&model, n, a.reps));
                eprintln!(
                    "prefill {n} on {}: best {best:.1} tok/s {tok_s:.1?}",
                    kernel.name()
                );
                prefills.push(serde_json::json!({"kernel": kernel.name(), "tokens": n,
                    "tok_s": tok_s, "tok_s_best": best}));
            }
        }
        report["prefill"] = serde_json::json!({"precision": "int8", "chunk": PREFILL_CHUNK,
            "runs": prefills});
        report["decode_by_kernel"] = serde_json::json!({"chosen": chosen.name(), "runs": decodes});
    }
    report["kernels"] = kernel_figures(a.reps);
    println!("{report:#}");
}
