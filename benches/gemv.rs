//! Per-kernel roofline figures for MNN-Pocket-0.3B's decode shapes, on the default adapter
//! (lavapipe here): each Q4 GEMV's effective bandwidth (bytes of weights and activations
//! read per second) next to a plain read-only kernel's (a vec4 sum of 64 MiB of storage
//! buffer; and the same bytes read as a code texture, which CPU adapters read faster) in
//! the same run, and the decode step's dispatches, submits and CPU encode time per token
//! on the synthetic Pocket model. Prints one JSON object.
//!
//! Each GEMV also gets the read kernel over as many bytes as it reads
//! (`read_same_bytes`, `roofline_ratio_same_bytes`): both then pay the same fixed cost per
//! dispatch and read data of the same size (hot in the same caches), which for the small
//! shapes is a large part of the time (`dispatch_fixed_us`: one workgroup's GEMV).
//!
//! Run: `cargo bench --bench gemv` (`POCKETRT_PROFILE=gpu|lavapipe|swiftshader` forces a
//! device profile, hence the GEMV designs; `POCKETRT_GEMV_LAYOUTS=8x16,8x32` adds each
//! shape timed in those rows layouts, workgroup width × output rows per invocation). GPU times come from timestamp queries where the
//! adapter has them (lavapipe does), else from wall time around submit + wait. Without
//! `--bench` (`cargo test --all-targets` runs benches that way) it is a quick smoke run:
//! a small read, small GEMVs and the tiny qwen3 model.

use pocketrt::gpu::code_texture::{CodeTexture, MatrixCodes};
use pocketrt::gpu::forward::Readback;
use pocketrt::gpu::kernels::common::gemv::GemvQ4;
use pocketrt::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, RowsLayout};
use pocketrt::gpu::kernels::common::q4_tiles::WIDTH;
use pocketrt::gpu::kernels::read_bench::ReadTextureBench;
use pocketrt::gpu::kernels::Dispatch;
use pocketrt::gpu::timing::{self, GpuTimer, ReadCeiling};
use pocketrt::gpu::weights::limits_needed;
use pocketrt::gpu::{GpuModel, LimitsNeeded, ProfiledContext};
use pocketrt::quant::Q4Tensor;
use pocketrt::synth::{q4_1_pairs, Rng, SynthSource};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Dispatches per timed pass, and passes (the best one counts: the machine is shared).
const REPEAT: usize = 8;
const PASSES: usize = 5;

/// Best seconds per dispatch over [`PASSES`] passes of [`REPEAT`] dispatches.
fn best_time(ctx: &ProfiledContext, timer: Option<&GpuTimer>, d: &Dispatch) -> f64 {
    timing::best_time(ctx, timer, d, REPEAT, PASSES).expect("timed passes")
}

/// The read ceiling: GB/s of the vec4 sum over `len` f32 ([`ReadCeiling`]).
fn read_ceiling(ctx: &ProfiledContext, timer: Option<&GpuTimer>, len: usize) -> serde_json::Value {
    ReadCeiling::measure(ctx, timer, len, REPEAT, PASSES)
        .expect("read ceiling")
        .to_json()
}

/// The texture read ceiling: GB/s of summing the same `len` f32 as a code texture
/// (`gpu::code_texture`), best of a few grid sizes.
fn texture_read_ceiling(
    ctx: &ProfiledContext,
    timer: Option<&GpuTimer>,
    len: usize,
) -> serde_json::Value {
    let data = ctx
        .storage("read data", 4 * len as u64)
        .expect("read buffer");
    let bytes = 4 * len as u64;
    let texture = CodeTexture::from_buffer(ctx, &data, bytes).expect("texture");
    let height = (bytes / 16).div_ceil(u64::from(WIDTH)) as u32;
    let mut best = (0.0f64, 0u32);
    for groups in [1u32, 2, 8, 32, 128] {
        let Ok(k) = ReadTextureBench::new(ctx, height, groups) else {
            continue; // a grid that does not divide the rows
        };
        let out = ctx.storage("partials", 4 * k.partials() as u64).unwrap();
        let d = k.dispatch(ctx, &texture.view, &out);
        let gbs = bytes as f64 / best_time(ctx, timer, &d) / 1e9;
        if gbs > best.0 {
            best = (gbs, groups);
        }
    }
    json!({
        "kernel": format!("texel sum of {} MiB (rgba32uint read-only storage texture, textureLoad)", len >> 18),
        "gb_s": best.0, "workgroups": best.1,
    })
}

/// One GEMV shape: effective GB/s = (codes + qparams + x (+ norm weights), + out for
/// residual adds) / time; in `layout`, else the variant's default.
fn gemv_figure(
    ctx: &ProfiledContext,
    timer: Option<&GpuTimer>,
    name: &str,
    spec: GemvSpec,
    layout: Option<RowsLayout>,
) -> serde_json::Value {
    // The profile's design for the shape's role (its name's first word).
    let role = name.split(' ').next().unwrap_or("").replace('+', "_");
    let designs = ctx.profile.gemv.roles();
    let variant = designs
        .iter()
        .find(|(r, _)| *r == role)
        .map_or(ctx.profile.gemv.qkv, |&(_, v)| v);
    let (n, k, epilogue) = (spec.n, spec.k, spec.epilogue);
    let rows = n * epilogue.parts();
    let mut rng = Rng::new(n as u64 * 31 + k as u64);
    let bytes = q4_1_pairs(rows, k, (3.0 / k as f32).sqrt(), &mut rng);
    let (w, _) =
        Q4Tensor::from_ggml(pocketrt::format::gguf::GgmlType::Q4_1, &bytes, rows, k).expect("q4");
    let x: Vec<f32> = (0..k).map(|_| rng.unit() - 0.5).collect();
    let kernel = match layout {
        Some(layout) => GemvQ4::with_layout(ctx, variant, spec, layout),
        None => GemvQ4::new(ctx, variant, spec),
    }
    .expect("gemv");
    let qparams = ctx.storage_init("qparams", &w.qparams).unwrap();
    let codes = MatrixCodes::upload(ctx, kernel.codes_read(), &w.codes, &qparams).unwrap();
    let xb = ctx.storage_init("x", &x).unwrap();
    let none = ctx.storage("none", 4).unwrap();
    let out = ctx.storage("out", 4 * n as u64).unwrap();
    let norm_w = ctx.storage_init("norm", &vec![1.0f32; k]).unwrap();
    let norm = spec.norm_eps.map(|_| &norm_w);
    let d = kernel.dispatch(ctx, codes.bind(), &qparams, &xb, norm, &none, &out);
    let seconds = best_time(ctx, timer, &d);
    let activations = 4 * k * (1 + usize::from(norm.is_some()))
        + if epilogue == Epilogue::AddInto {
            4 * n
        } else {
            0
        };
    let read = w.codes_bytes().len() + w.qparams_bytes().len() + activations;
    json!({
        "shape": name, "rows": n, "k": k, "epilogue": format!("{epilogue:?}"),
        "fused_norm": norm.is_some(),
        "variant": format!("{variant:?}"), "layout": layout.map(|l| format!("{}x{}", l.wg, l.rows)),
        "x_loads": format!("{:?}", kernel.x_loads()),
        "bytes_read": read,
        "us": seconds * 1e6, "gb_s": read as f64 / seconds / 1e9,
    })
}

/// The rows layouts `POCKETRT_GEMV_LAYOUTS` names ("WGxROWS,…"; none when unset).
fn layouts_from_env() -> Vec<RowsLayout> {
    let list = std::env::var("POCKETRT_GEMV_LAYOUTS").unwrap_or_default();
    list.split(',')
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let parse = |v: &str| v.trim().parse::<u32>().ok();
            match l.split_once('x').map(|(w, r)| (parse(w), parse(r))) {
                Some((Some(wg), Some(rows))) => RowsLayout { wg, rows },
                _ => panic!("POCKETRT_GEMV_LAYOUTS: {l:?} is not WGxROWS (e.g. 8x16)"),
            }
        })
        .collect()
}

/// Dispatches, submits and CPU encode time per token of a synthetic model.
fn decode_figures(preset: &str) -> serde_json::Value {
    let mut src = SynthSource::preset(preset, 1).expect("preset");
    let context = 64;
    let ctx = ProfiledContext::open_blocking(limits_needed(
        pocketrt::format::ModelSource::config(&src),
        context,
        false,
    ))
    .expect("device");
    let mut model = GpuModel::load(Arc::new(ctx), &mut src, context).expect("load");
    let steps = 16;
    let mut token = 1;
    // One warm-up pass: the first step also waits for the load's GPU work (the code
    // textures' repack) and pays first-touch costs.
    for pos in 0..steps {
        token = model.decode(token, pos).expect("decode");
    }
    let submits_before = model.submits();
    let t = Instant::now();
    for pos in 0..steps {
        token = model.decode(token, pos).expect("decode");
    }
    let tok_s = steps as f64 / t.elapsed().as_secs_f64();
    let submits = (model.submits() - submits_before) as f64 / steps as f64;
    // CPU time to write the uniform and encode one step (the command buffers are dropped).
    let t = Instant::now();
    for pos in 0..steps {
        drop(
            model
                .encode_step(token, pos, Readback::Argmax)
                .expect("encode"),
        );
    }
    let encode_us = t.elapsed().as_secs_f64() * 1e6 / steps as f64;
    json!({
        "model": format!("synthetic {preset}"), "dispatches_per_token": model.dispatches_per_token(),
        "dispatches_per_layer": model.dispatches_per_layer(), "submits_per_token": submits,
        "cpu_encode_us_per_token": encode_us, "decode_tok_s_wall": tok_s,
    })
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let ctx =
        Arc::new(ProfiledContext::open_blocking(LimitsNeeded::default()).expect("a GPU adapter"));
    let timer = GpuTimer::new(&ctx);
    let ceiling = read_ceiling(&ctx, timer.as_ref(), if full { 16 << 20 } else { 1 << 16 });
    let ceiling_gbs = ceiling["gb_s"].as_f64().unwrap_or(f64::NAN);
    let len = if full { 16 << 20 } else { 1 << 16 };
    let texture_ceiling = texture_read_ceiling(&ctx, timer.as_ref(), len);
    let texture_gbs = texture_ceiling["gb_s"].as_f64().unwrap_or(f64::NAN);
    // As decode runs them: the norm fused into QKV, gate/up and the head.
    let normed = |n, k, e| GemvSpec {
        norm_eps: Some(1e-6),
        add_parts: 0,
        ..GemvSpec::new(n, k, e)
    };
    let shapes = [
        ("qkv 896->1152", normed(1152, 896, Epilogue::Store)),
        ("gate+up 896->2x2560", normed(2560, 896, Epilogue::SwiGlu)),
        (
            "down 2560->896",
            GemvSpec::new(896, 2560, Epilogue::AddInto),
        ),
        ("o 896->896", GemvSpec::new(896, 896, Epilogue::AddInto)),
        ("head 896->65536", normed(65_536, 896, Epilogue::Store)),
    ];
    let smoke = [("smoke 128->64", normed(64, 128, Epilogue::SwiGlu))];
    // The fixed cost of one dispatch: a GEMV of one workgroup that reads next to nothing.
    let fixed = gemv_figure(
        &ctx,
        timer.as_ref(),
        "fixed",
        GemvSpec::new(1, 64, Epilogue::Store),
        None,
    );
    let layouts = layouts_from_env();
    let gemvs: Vec<serde_json::Value> = (if full { &shapes[..] } else { &smoke[..] })
        .iter()
        .map(|&(name, spec)| {
            let mut f = gemv_figure(&ctx, timer.as_ref(), name, spec, None);
            if !layouts.is_empty() {
                let each = layouts
                    .iter()
                    .map(|&l| gemv_figure(&ctx, timer.as_ref(), name, spec, Some(l)));
                f["layouts"] = each.collect::<Vec<_>>().into();
            }
            let gbs = f["gb_s"].as_f64().unwrap_or(0.0);
            f["roofline_ratio"] = (gbs / ceiling_gbs).into();
            f["roofline_ratio_texture"] = (gbs / texture_gbs).into();
            let bytes = f["bytes_read"].as_u64().unwrap_or(0) as usize;
            let same = read_ceiling(&ctx, timer.as_ref(), (bytes / 16).max(1) * 4);
            f["roofline_ratio_same_bytes"] =
                (gbs / same["gb_s"].as_f64().unwrap_or(f64::NAN)).into();
            f["read_same_bytes"] = same;
            f
        })
        .collect();
    let out = json!({
        "bench": "gemv",
        "adapter": format!("{} ({})", ctx.adapter.name, ctx.adapter.backend),
        "profile": ctx.profile.to_json(),
        "timing": if timer.is_some() { "timestamp queries" } else { "wall time" },
        "read_ceiling": ceiling,
        "texture_read_ceiling": texture_ceiling,
        "dispatch_fixed_us": fixed["us"],
        "gemv": gemvs,
        "decode": decode_figures(if full { "pocket-0.3b" } else { "tiny-qwen3" }),
    });
    println!("{out:#}");
}
