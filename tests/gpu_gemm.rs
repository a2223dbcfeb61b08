//! Q4 g64 and Q8 g32 GEMM (prefill) against the dequantized weights with f64 sums on the CPU, on edge
//! shapes: M = 1, 7, 64, 65, 300 token rows (one tile, partial tiles, several tiles);
//! K = 64 (one quant group, two K tiles), 192 and 896 (odd numbers of groups); N odd and
//! not a multiple of the 64-row tile; every epilogue, with bias and with the fused norm.
//! (K is always a multiple of the 32-wide K tile: the quant group is 64.)
//! Every case runs in every variant (the GPU design's workgroup tiles in f32, in f16 where
//! the adapter has shader-f16, and in a third layout with other register blocks; row
//! lanes with codes from their texture copy, row-major or in tile order, the CPU-adapter
//! designs), whatever the adapter; the tile layouts also at 1, tile − 1 and tile + 1 token
//! rows and on the 151,936-row head shape. Q8 matrices run every case in every tile
//! layout (the row lanes refuse them).
//! Tolerance as the GEMV's: ≤ 2e-6 · max|ref| + 1e-6 · sqrt(K); a wrong code, row, column
//! or epilogue is off by ≥ 1e-2. The f16 tiles are checked against a reference that
//! rounds the staged values (normed x, dequantized weights) to f16 as they do, within
//! 2e-4 · max|ref| (the products are f32, exact; ≤ 5.4e-5 measured on lavapipe); the f16
//! tiles index exactly as the f32 ones, which are held to 2e-6.

mod gpu_common;

use gpu_common::{assert_close, chunk_uniform, f16_round, gpu, profiles, rmsnorm, Rng};
use pocketrt::gpu::code_texture::MatrixCodes;
use pocketrt::gpu::forward::designs::GemmQ4;
use pocketrt::gpu::kernels::common::gemm::{GemmTiles, GemmVariant};
use pocketrt::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, TextureOrder, XLoads};
use pocketrt::gpu::kernels::common::q4_codes::{Codes, CodesRead};
use pocketrt::gpu::kernels::MatrixFormat;
use pocketrt::quant::{Q4Tensor, Q8Tensor, QMatrix};

const EPS: f32 = 1e-6;

/// A third tile layout: 2 × 8 register blocks, two loaders per token row, 8 code words
/// per invocation.
const NARROW: GemmTiles = GemmTiles {
    bm: 16,
    bn: 32,
    tm: 2,
    tn: 8,
    f16: false,
};

/// The tile layouts the test adapter runs: the f16 tiles where it has shader-f16.
fn tile_layouts() -> Vec<GemmTiles> {
    let mut t = vec![GemmTiles::F32, NARROW];
    if gpu().adapter.features.shader_f16 {
        t.push(GemmTiles::F16);
    }
    t
}

fn variants() -> Vec<GemmVariant> {
    let mut v: Vec<_> = tile_layouts()
        .into_iter()
        .map(GemmVariant::WorkgroupTiles)
        .collect();
    v.push(GemmVariant::RowLanesFromTexture(TextureOrder::RowMajor));
    v.push(GemmVariant::RowLanesFromTexture(TextureOrder::Tiles));
    v
}

/// Does `variant` stage its tiles in f16?
fn staged_f16(variant: GemmVariant) -> bool {
    variant.tiles().is_some_and(|t| t.f16)
}

/// Run one GEMM on the GPU and the reference on the CPU; returns (gpu, reference).
fn run_case(variant: GemmVariant, spec: GemvSpec, m: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let ctx = gpu();
    let (n, k) = (spec.n, spec.k);
    let mut rng = Rng::new(seed);
    let rows = n * spec.epilogue.parts();
    let values = rng.vec(rows * k, 1.0);
    let w = match spec.format {
        MatrixFormat::Q4 => QMatrix::Q4(Q4Tensor::quantize(&values, rows, k).unwrap()),
        MatrixFormat::Q8 => QMatrix::Q8(Q8Tensor::quantize(&values, rows, k).unwrap()),
    };
    let x_in = rng.vec(m * k, 2.0);
    let norm_w = rng.vec(k, 1.5);
    let bias = if spec.bias {
        rng.vec(rows, 1.0)
    } else {
        vec![0.0]
    };
    let out0 = rng.vec(m * n, 1.0);

    // The f16 tiles hold f16 weights and normed x: the reference rounds them alike.
    let round = |v: &mut [f32]| {
        if staged_f16(variant) {
            v.iter_mut().for_each(|x| *x = f16_round(*x));
        }
    };
    let mut dense = vec![0f32; rows * k];
    for (r, row) in dense.chunks_exact_mut(k).enumerate() {
        w.dequantize_row(r, row);
    }
    round(&mut dense);
    let mut want = Vec::with_capacity(m * n);
    for t in 0..m {
        let xt = &x_in[t * k..][..k];
        let mut x = match spec.norm_eps {
            Some(eps) => rmsnorm(xt, &norm_w, eps),
            None => xt.to_vec(),
        };
        round(&mut x);
        let dot = |r: usize| {
            let d: f64 = dense[r * k..][..k]
                .iter()
                .zip(&x)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            d + if spec.bias { f64::from(bias[r]) } else { 0.0 }
        };
        for o in 0..n {
            want.push(match spec.epilogue {
                Epilogue::Store | Epilogue::StoreArgmax => dot(o) as f32,
                Epilogue::AddInto => (f64::from(out0[t * n + o]) + dot(o)) as f32,
                Epilogue::SwiGlu => {
                    let g = dot(o);
                    (g / (1.0 + (-g).exp()) * dot(n + o)) as f32
                }
            });
        }
    }

    let kernel = GemmQ4::with_variant(ctx, variant, spec).unwrap();
    assert_eq!(kernel.variant(), variant);
    // The row lanes load x through the subgroup where the profile uses 8-wide ones.
    let lanes = variant.is_lanes();
    let x_loads = match ctx.profile.subgroup_size {
        Some(8) => XLoads::Subgroup,
        _ => XLoads::Each,
    };
    assert_eq!(kernel.x_loads(), lanes.then_some(x_loads));
    let chunk = chunk_uniform(m);
    let (code_words, params) = match &w {
        QMatrix::Q4(q) => (&q.codes, &q.qparams),
        QMatrix::Q8(q) => (&q.codes, &q.scales),
    };
    let qparams = ctx.storage_init("qparams", params).unwrap();
    // A texture is in the decode GEMV's layout, as the model's is.
    let read = CodesRead::new(variant.texture_order(), &spec);
    let matrix = MatrixCodes::upload(ctx, read, code_words, &qparams).unwrap();
    let codes = matrix.bind();
    // x holds whole tiles of the row-lanes variant; the padding rows must not matter.
    let mut x_padded = x_in.clone();
    x_padded.resize(kernel.x_rows(m) * k, 1e30);
    let xb = ctx.storage_init("x", &x_padded).unwrap();
    let nb = ctx.storage_init("norm", &norm_w).unwrap();
    let bb = ctx.storage_init("bias", &bias).unwrap();
    let out = ctx.storage_init("out", &out0).unwrap();
    let norm = spec.norm_eps.is_some().then_some(&nb);
    let d = kernel
        .dispatch(ctx, &chunk, codes, &qparams, &xb, norm, &bb, &out, m)
        .unwrap();
    d.run(ctx, m).unwrap();
    (ctx.read_f32(&out, m * n).unwrap(), want)
}

/// Every variant on Q4 weights, every tile layout on Q8 weights (the row lanes refuse
/// them).
fn check(spec: GemvSpec, ms: &[usize], seed: u64) {
    for variant in variants() {
        check_variant(variant, spec, ms, seed);
        let q8 = GemvSpec {
            format: MatrixFormat::Q8,
            ..spec
        };
        match variant.is_lanes() {
            true => assert!(GemmQ4::with_variant(gpu(), variant, q8).is_err()),
            false => check_variant(variant, q8, ms, seed),
        }
    }
}

fn check_variant(variant: GemmVariant, spec: GemvSpec, ms: &[usize], seed: u64) {
    for &m in ms {
        let (got, want) = run_case(variant, spec, m, seed + m as u64);
        let what = format!(
            "GEMM {variant:?} {:?} M {m} N {} K {} {:?} bias {} norm {}",
            spec.format,
            spec.n,
            spec.k,
            spec.epilogue,
            spec.bias,
            spec.norm_eps.is_some()
        );
        let rel = if staged_f16(variant) { 2e-4 } else { 2e-6 };
        assert_close(&what, &got, &want, rel, 1e-6 * (spec.k as f32).sqrt());
    }
}

/// Each tile layout at 1, tile − 1 and tile + 1 token rows.
fn check_tile_edges(spec: GemvSpec, seed: u64) {
    for tiles in tile_layouts() {
        let bm = tiles.bm as usize;
        let variant = GemmVariant::WorkgroupTiles(tiles);
        for format in [MatrixFormat::Q4, MatrixFormat::Q8] {
            let spec = GemvSpec { format, ..spec };
            check_variant(variant, spec, &[1, bm - 1, bm + 1], seed);
        }
    }
}

fn spec(n: usize, k: usize, epilogue: Epilogue, bias: bool, norm: bool) -> GemvSpec {
    GemvSpec {
        n,
        k,
        epilogue,
        bias,
        norm_eps: norm.then_some(EPS),
        ..GemvSpec::new(n, k, epilogue)
    }
}

#[test]
fn gemm_store_matches_reference_on_edge_token_counts() {
    check(
        spec(67, 192, Epilogue::Store, false, false),
        &[1, 7, 64, 65, 300],
        10,
    );
}

#[test]
fn gemm_single_group_k_and_single_output_row() {
    check(spec(1, 64, Epilogue::Store, false, false), &[1, 65], 20);
    check(spec(129, 64, Epilogue::Store, true, false), &[7], 21);
}

#[test]
fn gemm_residual_add_with_bias_and_fused_norm_matches_reference() {
    check(spec(33, 896, Epilogue::AddInto, true, true), &[7, 65], 30);
    check(spec(95, 320, Epilogue::Store, true, true), &[64, 300], 31);
}

#[test]
fn gemm_long_k_matches_reference() {
    // Pocket's down projection K: each half tile of x (4 rows) is 40 KiB of uniforms.
    check(spec(70, 2560, Epilogue::AddInto, false, false), &[9], 35);
}

#[test]
fn gemm_fused_gate_up_swiglu_matches_reference() {
    check(
        spec(45, 192, Epilogue::SwiGlu, false, true),
        &[1, 65, 300],
        40,
    );
    check(spec(33, 128, Epilogue::SwiGlu, true, false), &[7], 41);
}

#[test]
fn gemm_tiles_match_reference_at_token_tile_edges_with_a_partial_last_row_tile() {
    // N = 67 and 45 gate/up pairs: not a multiple of any tile's rows.
    check_tile_edges(spec(67, 64, Epilogue::Store, true, false), 50);
    check_tile_edges(spec(45, 896, Epilogue::SwiGlu, false, true), 51);
    check_tile_edges(spec(67, 320, Epilogue::AddInto, false, true), 52);
}

#[test]
fn gemm_tiles_match_reference_on_the_151936_row_head_shape() {
    for tiles in tile_layouts() {
        let variant = GemmVariant::WorkgroupTiles(tiles);
        check_variant(
            variant,
            spec(151_936, 64, Epilogue::Store, false, true),
            &[2],
            55,
        );
    }
}

#[test]
fn gemm_tiles_reject_layouts_the_kernel_cannot_run() {
    let ctx = gpu();
    let s = spec(8, 64, Epilogue::Store, false, false);
    let bad = [
        GemmTiles {
            tm: 3,
            ..GemmTiles::F32
        }, // blocks do not divide the tile
        GemmTiles {
            tn: 1,
            ..GemmTiles::F32
        }, // SwiGLU needs even blocks
        GemmTiles {
            bm: 1,
            bn: 64,
            tm: 1,
            tn: 2,
            f16: false,
        }, // 32 loaders per token row
        GemmTiles {
            bm: 64,
            bn: 64,
            ..GemmTiles::F32
        }, // 32 KiB of f32 tiles
        GemmTiles {
            bm: 64,
            bn: 64,
            tm: 2,
            tn: 2,
            f16: true,
        }, // 1,024 invocations
    ];
    for tiles in bad {
        let r = GemmQ4::with_variant(ctx, GemmVariant::WorkgroupTiles(tiles), s);
        let Err(pocketrt::Error::InvalidArgument(e)) = r else {
            panic!("{tiles:?} accepted");
        };
        assert!(e.contains("GEMM tiles"), "{e}");
    }
    if !ctx.adapter.features.shader_f16 {
        let r = GemmQ4::with_variant(ctx, GemmVariant::WorkgroupTiles(GemmTiles::F16), s);
        assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(e)) if e.contains("shader-f16")));
    }
}

#[test]
fn gemm_rejects_k_not_a_multiple_of_the_group() {
    for variant in variants() {
        let r = GemmQ4::with_variant(gpu(), variant, spec(8, 100, Epilogue::Store, false, false));
        assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
    }
}

#[test]
fn gemm_takes_its_design_from_the_profile_reading_codes_as_the_gemv_does() {
    let s = spec(896, 2560, Epilogue::AddInto, false, false);
    for ctx in profiles() {
        let name = ctx.profile.name;
        let got = GemmQ4::new(ctx, s).unwrap().variant();
        assert_eq!(got, ctx.profile.gemm, "{name}");
        assert_eq!(got.texture_order(), ctx.profile.code_textures, "{name}");
    }
}

#[test]
fn gemm_row_lanes_rejects_an_x_buffer_shorter_than_whole_tiles() {
    let ctx = gpu();
    let s = spec(8, 64, Epilogue::Store, false, false);
    let order = TextureOrder::RowMajor;
    let kernel = GemmQ4::with_variant(ctx, GemmVariant::RowLanesFromTexture(order), s).unwrap();
    let chunk = ctx.uniform("chunk", 16);
    let small = ctx.storage("small", 4 * 64).unwrap();
    let codes = ctx.storage("codes", 8 * 32).unwrap();
    let codes = Codes::Buffer(&codes);
    let r = kernel.dispatch(ctx, &chunk, codes, &small, &small, None, &small, &small, 5);
    assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
}
