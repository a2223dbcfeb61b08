//! `pocketrt gpu-check`: is this GPU right, and how fast is it? Runs from a copied release
//! binary (`scripts/gpu-check`) in a few minutes on any adapter:
//!
//! 1. the adapter and its device profile (stderr);
//! 2. a model of a preset's exact shapes (default MNN-Pocket-0.3B's), synthesized in
//!    memory, loaded on the GPU and on the CPU oracle (`cpu::Model`, Q4 weights on both);
//!    the GPU's logits for a few greedy tokens against the oracle's (max abs err ≤
//!    [`REL`] · max|logit| + [`ABS`] per token, and the same greedy token unless the
//!    oracle's two best are closer than that): on a mismatch the check fails (an error and
//!    a nonzero exit);
//! 3. decode tok/s at position 0 and at a long position (default 4,096: a step there reads
//!    the cache's first `pos + 1` positions, whatever they hold, so they need not be
//!    filled), pipelined decode tok/s from position 0 (greedy, and sampled with the draw
//!    on the GPU), also with W_o folded into attention the other way than the profile does
//!    (`fold_output`: on and off side by side, for deciding the profile's default on this
//!    device), prefill tok/s, dispatches and submits per token, and each kernel's GPU
//!    time, bytes read and effective GB/s next to a plain read kernel's GB/s on the same
//!    adapter (the roofline ratio);
//! 4. the prefill GEMMs' GFLOP/s per shape and design, and the GPU GEMVs' GB/s with x in
//!    f32 and f16 (`gpu_check_kernels`);
//! 5. the tuner's sweep of the profile's free constants (`gpu::tune`, `--tune-ms`): its
//!    table, the profile's own design against the one it would keep (not kept here), and
//!    decode tok/s in that design (the positions of 3, and pipelined greedy).
//!
//! Prints one JSON document on stdout; progress and a summary go to stderr.

use super::bench::{kernel_json, synthetic_prompt};
use super::gpu_check_kernels::{gemm_figures, gemv_f16_figures, tune_figures};
use pocketrt::cpu::ops::argmax;
use pocketrt::cpu::{Model, WeightMode};
use pocketrt::format::ModelSource;
use pocketrt::gpu::forward::StepOptions;
use pocketrt::gpu::kernels::topk::TOPK_MAX;
use pocketrt::gpu::timing::{GpuTimer, ReadCeiling};
use pocketrt::gpu::tune::Tuned;
use pocketrt::gpu::weights::limits_needed;
use pocketrt::gpu::weights::ModelWeights;
use pocketrt::gpu::{GpuModel, KernelTime, ProfiledContext};
use pocketrt::sampler::{Sampler, SamplerConfig};
use pocketrt::synth::SynthSource;
use pocketrt::{Error, ModelConfig, Result};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// The oracle tolerance: max abs err ≤ REL · max|logit| + ABS. Ten times the tiny test
/// models' (tests/gpu_forward.rs): the GPU's f16 KV cache rounds every layer's k and v,
/// and over a full-depth model (Pocket's 28 layers) that alone measured up to ~0.9e-3 ·
/// max|logit| on lavapipe in both the lavapipe and gpu profiles. A wrong kernel, row,
/// code or position moves logits by the order of max|logit| itself.
const REL: f32 = 1e-2;
const ABS: f32 = 1e-3;

/// Untimed decode steps before each timed loop (first-touch costs, the split path).
const WARMUP_STEPS: usize = 2;
/// A timed decode loop runs at least this many steps, however slow they are.
const MIN_STEPS: usize = 3;
/// Read-ceiling timing: dispatches per timed pass and passes (as benches/gemv.rs).
const READ_REPEAT: usize = 8;
const READ_PASSES: usize = 5;

#[derive(clap::Args)]
pub struct GpuCheckArgs {
    /// The model's shapes: pocket-0.3b (MNN-Pocket-0.3B), tiny-qwen3, tiny-qwen2 or
    /// tiny-llama (small, for tests).
    #[arg(long, default_value = "pocket-0.3b")]
    pub preset: String,
    /// Seed of the synthetic weights.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Greedy tokens checked against the CPU oracle (slow-ish on the full model).
    #[arg(long, default_value_t = 4)]
    pub oracle_tokens: usize,
    /// The long position decode is timed at.
    #[arg(long, default_value_t = 4096)]
    pub long_pos: usize,
    /// Prompt tokens of the timed prefill.
    #[arg(long, default_value_t = 512)]
    pub prefill: usize,
    /// KV cache positions (default: enough for --long-pos and --prefill).
    #[arg(long)]
    pub context: Option<usize>,
    /// Most timed decode steps per position.
    #[arg(long, default_value_t = 32)]
    pub steps: usize,
    /// A timed decode loop stops after this many seconds (once it has run 3 steps).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Each dispatch of the per-kernel profile is timed this many times (the best counts).
    #[arg(long, default_value_t = 3)]
    pub passes: usize,
    /// Each dispatch of the per-kernel profile runs this many times in a row in its timed
    /// pass (the mean counts: its cost within a stream of dispatches, as in a step; 1:
    /// alone, launch and pass start included).
    #[arg(long, default_value_t = 20)]
    pub in_a_row: usize,
    /// The tuner's sweep budget in ms (0: the profile's own design alone).
    #[arg(long, default_value_t = 2000)]
    pub tune_ms: u64,
}

pub fn run(a: GpuCheckArgs) -> Result<()> {
    let t_start = Instant::now();
    let progress = |what: &str| eprintln!("[{:6.1} s] {what}", t_start.elapsed().as_secs_f64());
    let mut src = SynthSource::preset(&a.preset, a.seed)?;
    let cfg = src.config().clone();
    let context = check_context(&a, &cfg)?;

    let ctx = Arc::new(ProfiledContext::open_blocking(limits_needed(
        &cfg, context, false,
    ))?);
    let adapter = &ctx.adapter;
    eprintln!(
        "adapter: {} ({}, {:?}, subgroups {:?}, timestamps {})",
        adapter.name,
        adapter.backend,
        adapter.device_type,
        adapter.subgroup_size,
        adapter.features.timestamp_query
    );
    eprintln!("{}", ctx.profile);

    progress(&format!(
        "synthesizing {} (seed {}) and loading it on the GPU with {context} positions",
        a.preset, a.seed
    ));
    let t = Instant::now();
    let mut model = GpuModel::load(ctx.clone(), &mut src, context)?;
    let load_s = t.elapsed().as_secs_f64();
    progress(&format!(
        "checking {} greedy tokens against the CPU oracle",
        a.oracle_tokens
    ));
    let oracle = oracle_check(&mut model, &mut src, a.oracle_tokens)?;

    let mut submits = (0, 0);
    let decode = time_decode_positions(&mut model, &a, &mut submits, &progress)?;
    let fold_output = time_other_fold(&ctx, (&model, context), &decode, &a, &mut src, &progress)?;

    let tokens = a.steps.min(context - 1);
    progress(&format!(
        "timing {tokens} pipelined tokens, greedy and sampled"
    ));
    let pipelined = time_pipelined(&mut model, tokens)?;

    progress(&format!("timing a prefill of {} tokens", a.prefill));
    let prefill = time_prefill(&mut model, a.prefill)?;
    progress("timing speculative decoding's verification step (1, 2, 4, 8 positions)");
    let verify = time_verify(&mut model, context)?;

    progress("measuring the read ceiling");
    let timer = GpuTimer::new(&ctx);
    let read_bytes = pocketrt::gpu::forward::q4_bytes(cfg.vocab_size, cfg.hidden_size)
        .next_power_of_two()
        .clamp(1 << 20, 64 << 20);
    let ceiling = ReadCeiling::measure(
        &ctx,
        timer.as_ref(),
        (read_bytes / 4) as usize,
        READ_REPEAT,
        READ_PASSES,
    )?;

    let profiles = step_profiles(&mut model, &a, ceiling.best.gb_s, &progress)?;

    let gemm_tokens = a.prefill.min(model.prefill_chunk_len());
    progress(&format!("timing the prefill GEMMs at {gemm_tokens} tokens"));
    let gemm = gemm_figures(&ctx, timer.as_ref(), &cfg, gemm_tokens, a.passes)?;
    progress("timing the GPU GEMVs with x in f32 and f16");
    let gemv_f16 = gemv_f16_figures(&ctx, timer.as_ref(), &cfg, a.passes)?;
    progress("sweeping the tuner's designs");
    let (mut tune, chosen) = tune_figures(&ctx, &cfg, &model.weights, a.tune_ms)?;
    if let Some(design) = chosen {
        progress("timing decode in the tuned design");
        let weights = model.weights.clone();
        let (model_in, gb_s) = ((&cfg, weights, context), ceiling.best.gb_s);
        tune["decode"] = time_tuned(&ctx, model_in, design, (&a, gb_s), &progress)?;
    }

    let report = json!({
        "check": "pocketrt gpu-check",
        "version": env!("CARGO_PKG_VERSION"),
        "adapter": {
            "name": adapter.name,
            "backend": adapter.backend,
            "device_type": format!("{:?}", adapter.device_type),
            "subgroup_size": adapter.subgroup_size,
            "timestamp_query": adapter.features.timestamp_query,
            "shader_f16": adapter.features.shader_f16,
            "subgroups": adapter.features.subgroups,
            "wgsl_packed_4x8": adapter.features.packed_4x8,
        },
        "profile": ctx.profile.to_json(),
        "model": {
            "preset": a.preset, "seed": a.seed, "arch": cfg.arch.name(),
            "layers": cfg.n_layers, "hidden": cfg.hidden_size, "ffn": cfg.ffn_size,
            "heads": cfg.n_heads, "kv_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim,
            "vocab": cfg.vocab_size, "context": context, "load_s": load_s,
        },
        "oracle": oracle,
        "decode": decode,
        "fold_output": fold_output,
        "submits_per_token": submits.1 as f64 / submits.0.max(1) as f64,
        "pipelined": pipelined,
        "prefill": prefill,
        "verify": verify,
        "read_ceiling": ceiling.to_json(),
        "timing": match timer {
            Some(_) => "tok/s: wall time; kernels: timestamp queries",
            None => "tok/s: wall time; kernels: wall time of each submit (no timestamp queries)",
        },
        "step_profiles": profiles,
        "gemm": gemm,
        "gemv_x_f16": gemv_f16,
        "tune": tune,
        "total_s": t_start.elapsed().as_secs_f64(),
    });
    print_summary(&report);
    println!("{report:#}");
    Ok(())
}

/// The context: `--context`, or enough for the long position and the prefill (and the
/// oracle's tokens); within the model's.
fn check_context(a: &GpuCheckArgs, cfg: &ModelConfig) -> Result<usize> {
    if a.oracle_tokens == 0 || a.prefill == 0 || a.steps == 0 {
        return Err(Error::InvalidArgument(
            "gpu-check needs --oracle-tokens, --prefill and --steps ≥ 1".into(),
        ));
    }
    let needed = (a.long_pos + 1).max(a.prefill).max(a.oracle_tokens);
    let context = a.context.unwrap_or(needed);
    if context < needed {
        return Err(Error::InvalidArgument(format!(
            "--context {context}: --long-pos {}, --prefill {} and --oracle-tokens {} need {needed}",
            a.long_pos, a.prefill, a.oracle_tokens
        )));
    }
    if context > cfg.max_context {
        return Err(Error::InvalidArgument(format!(
            "a context of {context} positions exceeds preset {}'s {} (lower --long-pos or \
             --prefill)",
            a.preset, cfg.max_context
        )));
    }
    Ok(context)
}

/// `tokens` greedy steps on the GPU and on the oracle from the same first token, each
/// step's logits within the tolerance and the same greedy token, else an error.
fn oracle_check(model: &mut GpuModel, src: &mut SynthSource, tokens: usize) -> Result<Value> {
    let oracle = Model::load(src, WeightMode::Q4)?;
    let mut cache = oracle.new_cache(tokens)?;
    let (mut token, mut greedy) = (1u32, vec![]);
    let (mut worst_err, mut worst_tol, mut max_logit) = (0f32, f32::INFINITY, 0f32);
    for pos in 0..tokens {
        let want = oracle.forward(token, &mut cache)?;
        let (next, got) = model.decode_with_logits(token, pos)?;
        let differ = |detail: String| {
            Error::Gpu(format!(
                "GPU logits differ from the CPU oracle at position {pos} (token {token}): \
                 {detail}"
            ))
        };
        if let Some(bad) = got.iter().find(|g| !g.is_finite()) {
            return Err(differ(format!("a non-finite GPU logit {bad}")));
        }
        let err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0f32, f32::max);
        let mag = want.iter().map(|w| w.abs()).fold(0f32, f32::max);
        let tol = REL * mag + ABS;
        eprintln!(
            "  position {pos}: max abs err {err:.3e} (max |logit| {mag:.3e}, tolerance {tol:.3e})"
        );
        if err > tol {
            return Err(differ(format!(
                "max abs err {err:.3e} > tolerance {tol:.3e} (max |logit| {mag:.3e})"
            )));
        }
        let want_next = argmax(&want).unwrap_or(0) as u32;
        // A different greedy token only where the oracle's best two are within the
        // tolerance of each other (a near tie the f16 cache may flip).
        let tie = (want[want_next as usize] - want[next as usize]).abs() <= tol;
        if next != want_next && !tie {
            return Err(differ(format!(
                "GPU greedy token {next}, oracle {want_next}"
            )));
        }
        if err / tol >= worst_err / worst_tol {
            (worst_err, worst_tol) = (err, tol);
        }
        max_logit = max_logit.max(mag);
        greedy.push(next);
        token = next;
    }
    Ok(json!({
        "passed": true,
        "tokens": tokens,
        "greedy": greedy,
        "max_abs_err": worst_err,
        "tolerance": worst_tol,
        "max_abs_logit": max_logit,
        "rule": "per token: max abs err ≤ 1e-2·max|logit| + 1e-3 (the worst token's figures), same greedy token but for near ties",
    }))
}

/// [`time_decode`] at position 0 and `--long-pos`; `submits` adds (steps, submits).
fn time_decode_positions(
    model: &mut GpuModel,
    a: &GpuCheckArgs,
    submits: &mut (usize, u64),
    progress: &impl Fn(&str),
) -> Result<Vec<Value>> {
    let mut decode = vec![];
    for pos in [0, a.long_pos] {
        progress(&format!(
            "timing decode at position {pos} (W_o folded: {})",
            model.folds_output()
        ));
        let (entry, steps, submitted) = time_decode(model, pos, a.steps, a.seconds)?;
        decode.push(entry);
        *submits = (submits.0 + steps, submits.1 + submitted);
    }
    Ok(decode)
}

/// Decode with W_o folded into attention and as a GEMV of its own, side by side: `decode`
/// (`model`'s, of `context` positions, folded as the profile says) and the same weights
/// loaded the other way, timed the same way right after (then dropped). `{"on": …,
/// "off": …}`; `null` the way the profile cannot build the shape.
fn time_other_fold(
    ctx: &Arc<ProfiledContext>,
    (model, context): (&GpuModel, usize),
    decode: &[Value],
    a: &GpuCheckArgs,
    src: &mut SynthSource,
    progress: &impl Fn(&str),
) -> Result<Value> {
    let folded = model.folds_output();
    let options = StepOptions {
        fold_output: Some(!folded),
    };
    progress(&format!(
        "loading the model with W_o folded: {} (for the fold on / off figures)",
        !folded
    ));
    let mut other = GpuModel::load_with(ctx.clone(), src, context, options)?;
    let other_decode = match other.folds_output() != folded {
        true => time_decode_positions(&mut other, a, &mut (0, 0), progress)?.into(),
        false => Value::Null,
    };
    let (on, off) = match folded {
        true => (decode.to_vec().into(), other_decode),
        false => (other_decode, decode.to_vec().into()),
    };
    Ok(json!({ "on": on, "off": off }))
}

/// The step's kernels, each dispatch timed `--in-a-row` times in a row, at position 0 and
/// `--long-pos` ([`kernel_profile`] against the read ceiling `gb_s`).
fn step_profiles(
    model: &mut GpuModel,
    a: &GpuCheckArgs,
    gb_s: f64,
    progress: &impl Fn(&str),
) -> Result<Vec<Value>> {
    let mut profiles = vec![];
    for pos in [0, a.long_pos] {
        progress(&format!("profiling the step's kernels at position {pos}"));
        let kernels = model.profile_step(1, pos, a.passes, a.in_a_row)?;
        profiles.push(kernel_profile(&kernels, pos, gb_s, a.in_a_row));
    }
    Ok(profiles)
}

/// Decode as [`time_decode_positions`] and [`time_pipelined`] do, and the kernels as
/// [`step_profiles`], in the tuner's chosen `design` over the same weights (`{"design",
/// "decode", "pipelined", "step_profiles"}`): the profile's own design against the tuned
/// one, both by wall clock.
fn time_tuned(
    ctx: &ProfiledContext,
    (cfg, weights, context): (&ModelConfig, ModelWeights, usize),
    design: Tuned,
    (a, gb_s): (&GpuCheckArgs, f64),
    progress: &impl Fn(&str),
) -> Result<Value> {
    let tuned = Arc::new(ctx.tuned_to(design.apply(&ctx.profile)));
    let options = StepOptions::default();
    let mut model = GpuModel::with_options(tuned, cfg.clone(), weights, context, options)?;
    let decode = time_decode_positions(&mut model, a, &mut (0, 0), progress)?;
    let pipelined = time_pipelined(&mut model, a.steps.min(context - 1))?;
    let profiles = step_profiles(&mut model, a, gb_s, progress)?;
    drop(model.release());
    Ok(json!({
        "design": design.to_string(), "decode": decode, "pipelined": pipelined,
        "step_profiles": profiles,
    }))
}

/// Decode steps at `pos` (each writes and reads that position), after
/// [`WARMUP_STEPS`]: until `steps` steps or `seconds` (at least [`MIN_STEPS`]), wall time
/// of `decode` (the argmax readback included). Returns the entry, the timed steps and their
/// submits.
fn time_decode(
    model: &mut GpuModel,
    pos: usize,
    steps: usize,
    seconds: f64,
) -> Result<(Value, usize, u64)> {
    let mut token = 1;
    for _ in 0..WARMUP_STEPS {
        token = model.decode(token, pos)?;
    }
    let submits = model.submits();
    let t = Instant::now();
    let mut n = 0;
    while n < steps && (n < MIN_STEPS || t.elapsed().as_secs_f64() < seconds) {
        token = model.decode(token, pos)?;
        n += 1;
    }
    let s = t.elapsed().as_secs_f64();
    let submitted = model.submits() - submits;
    let entry = json!({
        "position": pos, "steps": n, "seconds": s, "tok_s": n as f64 / s,
        "ms_per_token": s * 1e3 / n as f64, "dispatches": model.dispatches_at(pos),
        "submits_per_token": submitted as f64 / n as f64,
    });
    Ok((entry, n, submitted))
}

/// Decoding pipelined one step ahead from position 0, as sessions decode: greedy, and
/// sampled (top-k 40, top-p 0.95 at temperature 0.8, drawn on the GPU); wall time of `n`
/// tokens each (positions advance), after a short untimed run.
fn time_pipelined(model: &mut GpuModel, n: usize) -> Result<Value> {
    let config = SamplerConfig {
        temperature: 0.8,
        top_k: 40,
        top_p: 0.95,
        seed: 1,
        ..SamplerConfig::greedy()
    };
    let draws = Sampler::new(config)?.gpu_draws(TOPK_MAX);
    let mut figures = serde_json::Map::new();
    for (name, draws) in [("greedy", None), ("sampled", draws)] {
        let run = |model: &mut GpuModel, n: usize| -> Result<f64> {
            let mut count = 0;
            let on_token = |_, _| {
                count += 1;
                Ok(count < n)
            };
            let t = Instant::now();
            match draws.clone() {
                Some(mut d) => model.sampled_pipelined(1, 0, &mut d, on_token)?,
                None => model.greedy_pipelined(1, 0, on_token)?,
            };
            Ok(t.elapsed().as_secs_f64())
        };
        run(model, n.min(WARMUP_STEPS))?;
        let s = run(model, n)?;
        figures.insert(
            name.into(),
            json!({ "tokens": n, "seconds": s, "tok_s": n as f64 / s }),
        );
    }
    Ok(figures.into())
}

/// A prompt of `n` tokens from position 0 as the engine runs it (`feed_all`: batched
/// prefill where it pays, then the last token's decode step), wall time up to the greedy
/// token read back; after a short untimed prefill.
fn time_prefill(model: &mut GpuModel, n: usize) -> Result<Value> {
    let prompt = synthetic_prompt(n, model.config.vocab_size);
    let run = |model: &mut GpuModel, p: &[u32]| -> Result<u32> {
        let (&last, head) = p.split_last().expect("a non-empty prompt");
        if !head.is_empty() {
            model.feed_all(head, 0)?;
        }
        model.decode(last, head.len())
    };
    run(model, &prompt[..n.min(8)])?;
    let submits = model.submits();
    let t = Instant::now();
    run(model, &prompt)?;
    let s = t.elapsed().as_secs_f64();
    Ok(json!({
        "tokens": n, "seconds": s, "tok_s": n as f64 / s,
        "batched": model.prefill_pays(), "chunk": model.prefill_chunk_len(),
        "submits": model.submits() - submits,
    }))
}

/// Speculative decoding's verification step (`GpuModel::verify_argmax`: k positions in
/// one submit, k argmaxes read back) against one greedy decode step at the same place:
/// ms per step for k = 1, 2, 4, 8 — what a step of k − 1 drafts costs on this GPU.
fn time_verify(model: &mut GpuModel, context: usize) -> Result<Value> {
    const REPS: usize = 20;
    let pos = (context / 2).min(128);
    let tokens = synthetic_prompt(8, model.config.vocab_size);
    let time = |k: usize, model: &mut GpuModel| -> Result<f64> {
        let step = |model: &mut GpuModel| match k {
            0 => model.decode(tokens[0], pos).map(drop),
            k => model.verify_argmax(&tokens[..k], pos).map(drop),
        };
        step(model)?; // the staging buffers and pipelines made first
        let t = Instant::now();
        for _ in 0..REPS {
            step(model)?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / REPS as f64)
    };
    let decode_ms = time(0, model)?;
    let mut rows = vec![];
    for k in [1, 2, 4, 8] {
        let ms = time(k, model)?;
        rows.push(json!({"positions": k, "ms_per_step": ms, "vs_decode_step": ms / decode_ms}));
    }
    Ok(json!({
        "position": pos, "decode_step_ms": decode_ms, "steps": rows,
        "note": "wall time per step, mean of 20; verify_argmax: decode's step recorded k times in one submit",
    }))
}

/// One step's kernels at `pos`: [`kernel_json`] with each one's bytes read, GB/s and
/// ratio to the read ceiling.
fn kernel_profile(kernels: &[KernelTime], pos: usize, ceiling: f64, in_a_row: usize) -> Value {
    let entries: Vec<Value> = kernels
        .iter()
        .map(|k| {
            let mut e = kernel_json(k);
            e["roofline_ratio"] = (k.bytes_read as f64 / k.seconds / 1e9 / ceiling).into();
            e
        })
        .collect();
    let seconds: f64 = kernels.iter().map(|k| k.seconds).sum();
    let bytes: u64 = entries
        .iter()
        .filter_map(|e| e["bytes_read"].as_u64())
        .sum();
    json!({
        "position": pos,
        "note": format!(
            "each dispatch timed {in_a_row} times in a row in a pass (the mean; best of \
             --passes), summed per kernel over the layers; bytes_read: weights + activations \
             + KV streamed (src/gpu/forward/bytes.rs)"
        ),
        "in_a_row": in_a_row,
        "ms": seconds * 1e3,
        "bytes_read": bytes,
        "gb_s": bytes as f64 / seconds / 1e9,
        "roofline_ratio": bytes as f64 / seconds / 1e9 / ceiling,
        "kernels": entries,
    })
}

/// The main figures, for people (stderr).
fn print_summary(r: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let o = &r["oracle"];
    eprintln!(
        "oracle: passed ({} tokens, max abs err {:.3e} ≤ {:.3e})",
        o["tokens"],
        f(&o["max_abs_err"]),
        f(&o["tolerance"])
    );
    for d in r["decode"].as_array().into_iter().flatten() {
        eprintln!(
            "decode at position {}: {:.2} tok/s ({} steps, {} dispatches, {} submits per token)",
            d["position"],
            f(&d["tok_s"]),
            d["steps"],
            d["dispatches"],
            d["submits_per_token"]
        );
    }
    let p = &r["pipelined"];
    eprintln!(
        "pipelined decode: greedy {:.2} tok/s, sampled (drawn on the GPU) {:.2} tok/s",
        f(&p["greedy"]["tok_s"]),
        f(&p["sampled"]["tok_s"])
    );
    for fold in ["on", "off"] {
        for d in r["fold_output"][fold].as_array().into_iter().flatten() {
            eprintln!(
                "decode with W_o folded {fold} at position {}: {:.2} tok/s ({} dispatches)",
                d["position"],
                f(&d["tok_s"]),
                d["dispatches"]
            );
        }
    }
    let t = &r["tune"]["decode"];
    for d in t["decode"].as_array().into_iter().flatten() {
        eprintln!(
            "decode in the tuned design at position {}: {:.2} tok/s ({} dispatches)",
            d["position"],
            f(&d["tok_s"]),
            d["dispatches"]
        );
    }
    if let Some(g) = t["pipelined"]["greedy"]["tok_s"].as_f64() {
        eprintln!("pipelined greedy decode in the tuned design: {g:.2} tok/s");
    }
    let p = &r["prefill"];
    eprintln!(
        "prefill of {} tokens: {:.2} tok/s",
        p["tokens"],
        f(&p["tok_s"])
    );
    let v = &r["verify"];
    let steps = v["steps"].as_array().into_iter().flatten();
    let per_k: Vec<String> = steps
        .map(|s| format!("{}: {:.2} ms", s["positions"], f(&s["ms_per_step"])))
        .collect();
    eprintln!(
        "verification step (positions: ms per step): {}; a decode step {:.2} ms",
        per_k.join(", "),
        f(&v["decode_step_ms"])
    );
    eprintln!("read ceiling: {:.2} GB/s", f(&r["read_ceiling"]["gb_s"]));
    let tuned = t["step_profiles"].as_array().into_iter().flatten();
    let own = r["step_profiles"].as_array().into_iter().flatten();
    for (s, whose) in own
        .map(|s| (s, ""))
        .chain(tuned.map(|s| (s, " (tuned design)")))
    {
        eprintln!(
            "step at position {}{whose}: {:.2} ms of kernels, {:.2} GB/s ({:.2} of the read ceiling)",
            s["position"],
            f(&s["ms"]),
            f(&s["gb_s"]),
            f(&s["roofline_ratio"])
        );
        for k in s["kernels"].as_array().into_iter().flatten() {
            eprintln!(
                "  {:<38} {:>9.3} ms {:>8.2} GB/s {:>5.2}  {}",
                k["kernel"].as_str().unwrap_or(""),
                f(&k["ms"]),
                f(&k["gb_s"]),
                f(&k["roofline_ratio"]),
                k["design"].as_str().unwrap_or("")
            );
        }
    }
    for g in r["gemm"].as_array().into_iter().flatten() {
        eprintln!(
            "  gemm {:<8} {} tokens × {} × {}: {:>9.3} ms {:>8.2} GFLOP/s  {}",
            g["shape"].as_str().unwrap_or(""),
            g["tokens"],
            g["rows"],
            g["k"],
            f(&g["ms"]),
            f(&g["gflop_s"]),
            g["design"].as_str().unwrap_or("")
        );
    }
    for g in r["gemv_x_f16"].as_array().into_iter().flatten() {
        eprintln!(
            "  gemv {:<8} x {}: {:>9.3} ms {:>8.2} GB/s",
            g["shape"].as_str().unwrap_or(""),
            g["x"].as_str().unwrap_or(""),
            f(&g["ms"]),
            f(&g["gb_s"])
        );
    }
    eprintln!("total {:.1} s", f(&r["total_s"]));
}
