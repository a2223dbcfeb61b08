//! `pocketrt bench`: prompt processing (pp) and token generation (tg) speed, like
//! llama-bench: `-r` repetitions of `-p` prompt tokens then `-n` generated tokens, each
//! repetition from an empty cache, after one warm-up repetition that is not counted
//! (unless `--no-warmup`; first repetitions measured up to 3–4× slower on lavapipe); mean
//! ± standard deviation of tok/s.
//!
//! The prompt runs as the engine runs it: one batched prefill on the GPU (chunks of 256
//! tokens, then the last position's logits) and on the fast CPU backend (chunks of 64; the
//! last token a decode step), token by token on the reference. tok/s is
//! wall time (what a user sees, readback included); on adapters with timestamp queries the GPU time of a step's
//! pass is measured too, in one extra generation run. On the GPU the step is then profiled:
//! each dispatch timed alone, summed per kernel (embed, qkv, attention, ...).

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{self, Engine};
use pocketrt::format::{self, ModelSource};
use pocketrt::gpu::forward::StepOptions;
use pocketrt::gpu::tune::{load_tuned, TunedLoad};
use pocketrt::gpu::weights::limits_needed;
use pocketrt::gpu::{GpuModel, KernelTime, ProfiledContext};
use pocketrt::quant::WeightFormat;
use pocketrt::{Error, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub struct BenchArgs<'a> {
    pub model: &'a Path,
    pub backend: super::run::Backend,
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub reps: usize,
    /// Run one uncounted repetition first.
    pub warmup: bool,
    /// GPU: how the decode step is built (the adapter's defaults where unset).
    pub step: StepOptions,
    pub json: bool,
}

/// One decode step at an explicit position: the GPU model directly (for its submit
/// counts and timestamp timing), every other backend through the engine.
enum Stepper {
    Engine(Box<Engine>),
    /// With what the tuner did, if anything.
    Gpu(Box<GpuModel>, Option<String>),
}

impl Stepper {
    fn load(src: &mut dyn ModelSource, a: &BenchArgs, context: usize) -> Result<Self> {
        use super::run::Backend as B;
        let engine_backend = match a.backend {
            B::Gpu => {
                let ctx =
                    ProfiledContext::open_blocking(limits_needed(src.config(), context, false))?;
                // What users' loads run: the design the tuner keeps for this adapter.
                let load = TunedLoad {
                    options: a.step,
                    ..TunedLoad::from_env(WeightFormat::Q4)?
                };
                let (model, tuning) = load_tuned(Arc::new(ctx), src, context, load)?;
                let tuned = tuning.map(|t| t.describe());
                return Ok(Stepper::Gpu(Box::new(model), tuned));
            }
            B::Cpu => engine::Backend::Cpu,
            B::Reference => engine::Backend::Reference,
            B::Auto => engine::Backend::Auto,
        };
        let engine = Engine::load(src, engine_backend, WeightMode::Q4, context)?;
        Ok(Stepper::Engine(Box::new(engine)))
    }

    /// Start again from an empty cache.
    fn reset(&mut self) {
        // The GPU step overwrites position `pos` and attends to 0..=pos only.
        if let Stepper::Engine(e) = self {
            e.rewind(0);
        }
    }

    /// Run the prompt from position 0 and return the greedy next token.
    fn prompt(&mut self, prompt: &[u32]) -> Result<u32> {
        let (&last, head) = prompt.split_last().expect("a non-empty prompt");
        match self {
            Stepper::Engine(e) => {
                e.feed_all(head)?;
                e.step(last)
            }
            Stepper::Gpu(m, _) => {
                let logits = m.prefill(prompt, 0)?;
                Ok(pocketrt::cpu::ops::argmax(&logits).unwrap_or(0) as u32)
            }
        }
    }

    /// GPU queue submits so far (0 for the engine).
    fn submits(&self) -> u64 {
        match self {
            Stepper::Engine(_) => 0,
            Stepper::Gpu(m, _) => m.submits(),
        }
    }

    fn step(&mut self, token: u32, pos: usize) -> Result<u32> {
        match self {
            Stepper::Engine(e) => e.step(token),
            Stepper::Gpu(m, _) => m.decode(token, pos),
        }
    }
}

/// Mean and sample standard deviation.
fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

/// A fixed pseudo-random prompt of `n` tokens (the speed does not depend on the ids).
pub fn synthetic_prompt(n: usize, vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i as u64 * 2_654_435_761) % vocab as u64) as u32)
        .collect()
}

/// One kernel of [`GpuModel::profile_step`]: `{kernel, design, dispatches, ms,
/// bytes_read, gb_s}` (the bytes it reads per token: weights, KV cache, activations).
pub fn kernel_json(t: &KernelTime) -> serde_json::Value {
    serde_json::json!({
        "kernel": t.kernel, "design": t.design, "dispatches": t.dispatches, "ms": t.seconds * 1e3,
        "bytes_read": t.bytes_read, "gb_s": t.bytes_read as f64 / t.seconds / 1e9,
    })
}

fn test_json(name: String, tokens: usize, tok_s: &[f64], note: &str) -> serde_json::Value {
    let (mean, std) = mean_std(tok_s);
    serde_json::json!({
        "test": name, "tokens": tokens, "tok_s": tok_s,
        "tok_s_mean": mean, "tok_s_std": std, "note": note,
    })
}

pub fn run(a: BenchArgs) -> Result<()> {
    if a.reps == 0 || a.gen_tokens == 0 {
        return Err(Error::InvalidArgument(
            "bench needs -r ≥ 1 and -n ≥ 1".into(),
        ));
    }
    let t_load = Instant::now();
    let mut src = format::open(a.model)?;
    let cfg = src.config().clone();
    let context = a.prompt_tokens + a.gen_tokens;
    if context > cfg.max_context {
        return Err(Error::InvalidArgument(format!(
            "-p {} + -n {} exceeds the model's context of {}",
            a.prompt_tokens, a.gen_tokens, cfg.max_context
        )));
    }
    let mut stepper = Stepper::load(src.as_mut(), &a, context)?;
    let load_s = t_load.elapsed().as_secs_f64();
    let prompt = synthetic_prompt(a.prompt_tokens, cfg.vocab_size);
    let first = (cfg.vocab_size / 3) as u32;

    let (mut pp, mut tg) = (vec![], vec![]);
    let mut decode_submits = 0;
    let warmups = usize::from(a.warmup);
    for rep in 0..warmups + a.reps {
        let counted = rep >= warmups;
        stepper.reset();
        let t = Instant::now();
        let mut next = first;
        if !prompt.is_empty() {
            next = stepper.prompt(&prompt)?;
            if counted {
                pp.push(prompt.len() as f64 / t.elapsed().as_secs_f64());
            }
        }
        let t = Instant::now();
        let submits = stepper.submits();
        for pos in prompt.len()..context {
            next = stepper.step(next, pos)?;
        }
        if counted {
            tg.push(a.gen_tokens as f64 / t.elapsed().as_secs_f64());
            decode_submits += stepper.submits() - submits;
        }
    }

    let mut report = serde_json::json!({
        "model": a.model.display().to_string(),
        "arch": cfg.arch.name(),
        "load_s": load_s,
        "context": context,
        "repetitions": a.reps,
        "warmup": a.warmup,
    });
    let mut tests = vec![];
    if !pp.is_empty() {
        tests.push(test_json(
            format!("pp{}", a.prompt_tokens),
            a.prompt_tokens,
            &pp,
            "batched prefill on the GPU (chunks of 256 tokens) and the fast CPU backend (chunks of 64), token by token on the reference",
        ));
    }
    tests.push(test_json(
        format!("tg{}", a.gen_tokens),
        a.gen_tokens,
        &tg,
        "greedy decode, wall time including the 4-byte token readback",
    ));
    report["tests"] = tests.into();
    match &mut stepper {
        Stepper::Engine(e) => report["backend"] = e.description().into(),
        Stepper::Gpu(m, tuned) => {
            let ctx = m.gpu_context();
            let steps = (a.reps * a.gen_tokens) as f64;
            report["backend"] = "gpu".into();
            report["tuned"] = tuned.clone().into();
            report["adapter"] = ctx.adapter_label().into();
            report["profile"] = ctx.profile.to_json();
            report["dispatches_per_token"] = m.dispatches_per_token().into();
            report["dispatches_per_layer"] = m.dispatches_per_layer().into();
            report["attention"] = format!("{:?}", m.attention_variant()).into();
            report["submits_per_token"] = (decode_submits as f64 / steps).into();
            report["timing"] = "wall".into();
            if m.enable_gpu_timing() {
                let mut gpu_s = vec![];
                let mut next = first;
                for pos in 0..a.gen_tokens {
                    next = m.decode(next, pos)?;
                    if let Some(s) = m.last_step_gpu_seconds()? {
                        gpu_s.push(s);
                    }
                }
                let (mean, std) = mean_std(&gpu_s);
                report["timing"] = "wall; GPU pass time from timestamp queries".into();
                report["gpu_ms_per_token"] =
                    serde_json::json!({"mean": mean * 1e3, "std": std * 1e3});
                report["gpu_tok_s"] = (1.0 / mean).into();
            }
            // Last: it clobbers the state of the position it profiles.
            let pos = a.gen_tokens - 1;
            let kernels: Vec<serde_json::Value> = m
                .profile_step(first, pos, 3, 1)?
                .iter()
                .map(kernel_json)
                .collect();
            report["step_profile"] = serde_json::json!({
                "position": pos,
                "note": "each dispatch timed alone (best of 3), summed per kernel over the layers",
                "kernels": kernels,
            });
        }
    }
    if a.json {
        println!("{report:#}");
    } else {
        let profile = match &stepper {
            Stepper::Gpu(m, _) => Some(m.gpu_context().profile.to_string()),
            Stepper::Engine(_) => None,
        };
        print_table(&report, profile.as_deref());
    }
    Ok(())
}

/// The report as a table; `profile`: the GPU's device profile line.
fn print_table(r: &serde_json::Value, profile: Option<&str>) {
    let backend = match r["adapter"].as_str() {
        Some(ad) => format!("gpu {ad}"),
        None => r["backend"].as_str().unwrap_or("").to_string(),
    };
    println!(
        "| {:<40} | {:<36} | {:>6} | {:>16} |",
        "model", "backend", "test", "t/s"
    );
    println!("|{:-<42}|{:-<38}|{:-<8}|{:->18}|", "", "", "", "");
    for t in r["tests"].as_array().into_iter().flatten() {
        println!(
            "| {:<40} | {:<36} | {:>6} | {:>16} |",
            r["model"].as_str().unwrap_or(""),
            backend,
            t["test"].as_str().unwrap_or(""),
            format!(
                "{:.2} ± {:.2}",
                t["tok_s_mean"].as_f64().unwrap_or(0.0),
                t["tok_s_std"].as_f64().unwrap_or(0.0)
            )
        );
    }
    if let Some(p) = profile {
        println!("{p}");
    }
    if let Some(d) = r["dispatches_per_token"].as_u64() {
        println!(
            "{d} dispatches per token ({} per layer), {} submits per token",
            r["dispatches_per_layer"], r["submits_per_token"]
        );
    }
    if let Some(g) = r["gpu_ms_per_token"]["mean"].as_f64() {
        println!("GPU pass time {g:.2} ms per token (timestamp queries)");
    }
    if let Some(ks) = r["step_profile"]["kernels"].as_array() {
        let total: f64 = ks.iter().filter_map(|k| k["ms"].as_f64()).sum();
        println!(
            "step at position {}, each dispatch timed alone ({total:.2} ms in all):",
            r["step_profile"]["position"]
        );
        for k in ks {
            let ms = k["ms"].as_f64().unwrap_or(0.0);
            println!(
                "  {:<28} {:>4} dispatches {:>9.2} ms {:>5.1}%  {}",
                k["kernel"].as_str().unwrap_or(""),
                k["dispatches"],
                ms,
                100.0 * ms / total,
                k["design"].as_str().unwrap_or("")
            );
        }
    }
    println!("prompt: batched prefill on the GPU and the fast CPU backend, token by token on the reference");
}
