//! `gpu-check`'s kernel figures beyond the decode step's profile: the prefill GEMMs'
//! GFLOP/s on the model's four GEMM shapes at one chunk of tokens, in the profile's design
//! and (where the profile stages f16 tiles) the f32 tiles beside it; and the decode GEMVs'
//! GB/s with x in f32 and in f16 where the profile runs the GPU rows design and the
//! adapter has shader-f16 (`GpuRows::f16`, which no profile picks until a real GPU shows
//! it faster). Each figure is the best of `passes` timed passes.

use pocketrt::gpu::code_texture::MatrixCodes;
use pocketrt::gpu::forward::designs::GemmQ4;
use pocketrt::gpu::kernels::common::gemm::{ChunkUniform, GemmTiles, GemmVariant};
use pocketrt::gpu::kernels::common::gemv::GemvQ4;
use pocketrt::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, GemvVariant};
use pocketrt::gpu::kernels::common::q4_codes::CodesRead;
use pocketrt::gpu::timing::{time_pass, GpuTimer};
use pocketrt::gpu::tune::{self, Tuned};
use pocketrt::gpu::weights::ModelWeights;
use pocketrt::gpu::ProfiledContext;
use pocketrt::quant::Q4Tensor;
use pocketrt::{ModelConfig, Result};
use serde_json::{json, Value};

/// The model's GEMM shapes: (role, spec) with the fused norms and epilogues of prefill.
fn shapes(cfg: &ModelConfig) -> [(&'static str, GemvSpec); 4] {
    let (h, qd, f) = (cfg.hidden_size, cfg.q_dim(), cfg.ffn_size);
    let spec = |n, k, epilogue, norm: bool| GemvSpec {
        norm_eps: norm.then_some(cfg.rms_eps),
        ..GemvSpec::new(n, k, epilogue)
    };
    [
        ("qkv", spec(qd + 2 * cfg.kv_dim(), h, Epilogue::Store, true)),
        ("o", spec(h, qd, Epilogue::AddInto, false)),
        ("gate_up", spec(f, h, Epilogue::SwiGlu, true)),
        ("down", spec(h, f, Epilogue::AddInto, false)),
    ]
}

/// A matrix of `spec`'s rows with spread-out values (timing does not depend on them).
fn matrix(spec: &GemvSpec) -> Result<Q4Tensor> {
    let rows = spec.n * spec.epilogue.parts();
    let data: Vec<f32> = (0..rows * spec.k)
        .map(|i| ((i as u64).wrapping_mul(2_654_435_761) % 1000) as f32 / 1000.0 - 0.5)
        .collect();
    Q4Tensor::quantize(&data, rows, spec.k)
}

/// Best seconds of `passes` passes (after one warm-up) of whatever `encode` records.
fn best(
    ctx: &ProfiledContext,
    timer: Option<&GpuTimer>,
    passes: usize,
    encode: impl Fn(&mut wgpu::ComputePass<'_>),
) -> Result<f64> {
    time_pass(ctx, timer, 1, &encode)?;
    let mut best = f64::INFINITY;
    for _ in 0..passes.max(1) {
        best = best.min(time_pass(ctx, timer, 1, &encode)?);
    }
    Ok(best)
}

/// The prefill GEMMs at `m` tokens: each shape in each design, with its GFLOP/s.
pub fn gemm_figures(
    ctx: &ProfiledContext,
    timer: Option<&GpuTimer>,
    cfg: &ModelConfig,
    m: usize,
    passes: usize,
) -> Result<Value> {
    let mut variants = vec![ctx.profile.gemm];
    if ctx.profile.gemm.tiles().is_some_and(|t| t.f16) {
        variants.push(GemmVariant::WorkgroupTiles(GemmTiles::F32));
    }
    let chunk = ctx.uniform("gpu-check chunk", 16);
    let uniform = ChunkUniform {
        start: 0,
        count: m as u32,
        pad: [0; 2],
    };
    ctx.queue
        .write_buffer(&chunk, 0, bytemuck::bytes_of(&uniform));
    let mut out = vec![];
    for (role, spec) in shapes(cfg) {
        let w = matrix(&spec)?;
        let qparams = ctx.storage_init("qparams", &w.qparams)?;
        let norm = ctx.storage_init("norm", &vec![1.0f32; spec.k])?;
        let bias = ctx.storage("bias", 4)?;
        let y = ctx.storage("out", 4 * (m * spec.n) as u64)?;
        for &variant in &variants {
            let kernel = GemmQ4::with_variant(ctx, variant, spec)?;
            let read = CodesRead::new(variant.texture_order(), &spec);
            let codes = MatrixCodes::upload(ctx, read, &w.codes, &qparams)?;
            let x = ctx.storage_init("x", &vec![0.5f32; kernel.x_rows(m) * spec.k])?;
            let norm = spec.norm_eps.map(|_| &norm);
            let d = kernel.dispatch(ctx, &chunk, codes.bind(), &qparams, &x, norm, &bias, &y, m)?;
            d.run(ctx, m)?;
            let seconds = best(ctx, timer, passes, |pass| {
                d.encode(pass, m).expect("the grid was checked when bound")
            })?;
            let flops = 2.0 * (m * spec.n * spec.epilogue.parts() * spec.k) as f64;
            out.push(json!({
                "shape": role, "tokens": m, "rows": spec.n * spec.epilogue.parts(),
                "k": spec.k, "design": variant.label(), "ms": seconds * 1e3,
                "gflop_s": flops / seconds / 1e9,
            }));
        }
    }
    Ok(Value::Array(out))
}

/// The decode GEMVs of the GPU rows design with x in f32 and in f16 (empty where the
/// profile runs another design or the adapter has no shader-f16), with their GB/s.
pub fn gemv_f16_figures(
    ctx: &ProfiledContext,
    timer: Option<&GpuTimer>,
    cfg: &ModelConfig,
    passes: usize,
) -> Result<Value> {
    let GemvVariant::GpuRows(rows) = ctx.profile.gemv.qkv else {
        return Ok(json!([]));
    };
    if !ctx.adapter.features.shader_f16 {
        return Ok(json!([]));
    }
    let mut shapes = shapes(cfg).to_vec();
    shapes.push((
        "head",
        GemvSpec {
            norm_eps: Some(cfg.rms_eps),
            ..GemvSpec::new(cfg.vocab_size, cfg.hidden_size, Epilogue::Store)
        },
    ));
    let mut out = vec![];
    for (role, spec) in shapes {
        let w = matrix(&spec)?;
        let qparams = ctx.storage_init("qparams", &w.qparams)?;
        let x = ctx.storage_init("x", &vec![0.5f32; spec.k])?;
        let norm = ctx.storage_init("norm", &vec![1.0f32; spec.k])?;
        let bias = ctx.storage("bias", 4)?;
        let y = ctx.storage("out", 4 * spec.n as u64)?;
        let bytes = w.codes_bytes().len() + w.qparams_bytes().len() + 4 * spec.k;
        for f16 in [false, true] {
            let variant =
                GemvVariant::GpuRows(pocketrt::gpu::kernels::common::gemv_spec::GpuRows {
                    f16,
                    ..rows
                });
            let kernel = GemvQ4::new(ctx, variant, spec)?;
            let codes = MatrixCodes::upload(ctx, kernel.codes_read(), &w.codes, &qparams)?;
            let norm = spec.norm_eps.map(|_| &norm);
            let d = kernel.dispatch(ctx, codes.bind(), &qparams, &x, norm, &bias, &y);
            let seconds = best(ctx, timer, passes, |pass| d.encode(pass))?;
            out.push(json!({
                "shape": role, "rows": spec.n * spec.epilogue.parts(), "k": spec.k,
                "x": if f16 { "f16" } else { "f32" }, "ms": seconds * 1e3,
                "gb_s": bytes as f64 / seconds / 1e9,
            }));
        }
    }
    Ok(Value::Array(out))
}

/// The tuner's sweep on `weights` within `budget_ms` (its table on stderr), or why the
/// profile has nothing to tune; and the design it chose where that is not the profile's
/// own. Nothing is kept: the check measures, loads decide.
pub fn tune_figures(
    ctx: &ProfiledContext,
    cfg: &ModelConfig,
    weights: &ModelWeights,
    budget_ms: u64,
) -> Result<(Value, Option<Tuned>)> {
    let Some(own) = Tuned::of(&ctx.profile) else {
        let why = format!("profile {} reads the codes from textures", ctx.profile.name);
        return Ok((json!({ "skipped": why }), None));
    };
    let budget = std::time::Duration::from_millis(budget_ms);
    let s = pollster::block_on(tune::sweep(ctx, cfg, weights, budget))?;
    eprint!("{}", s.table());
    let speedup = s.speedup().map(|(best, start)| start / best);
    let figures = json!({ "sweep": s, "chosen": s.best.to_string(), "speedup": speedup });
    Ok((figures, (s.best != own).then_some(s.best)))
}
