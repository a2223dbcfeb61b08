//! Q4 g64 GEMV kernels (every variant, several row layouts and tile orders, every epilogue, with and
//! without the fused RMSNorm, with and without partial vectors added to x) and the Q8 g32
//! GEMV (the GPU rows design in its layouts; every case again), and the GPU rows design with
//! x staged per workgroup and the one-barrier slot reduction, against the dequantized
//! weights (`Q4Tensor::dequantize_row`, `Q8Tensor::dequantize_row`) with f64 sums on
//! the CPU.
//! Tolerance: max abs err ≤ 2e-6 · max|ref| + 1e-6 · sqrt(K) (f32 accumulation of K
//! products of magnitude ≤ 1); a wrong code, param, row or epilogue is off by ≥ 1e-2.
//!
//! Tiers (docs/TESTING.md): the default tier runs every case in the designs the device
//! profiles run, and every design and layout once (on the first test's shapes); the long
//! tier runs every case in every layout (each a new lavapipe compile).

#[path = "gpu_gemv/designs.rs"]
mod designs;
mod gpu_common;

/// Relative tolerance of the f16-x GPU design: its code dot products are f16 sums
/// (≤ 1.25e-3 · max|ref| measured on lavapipe); it indexes exactly as the f32 design,
/// which is held to 2e-6.
const F16_REL: f32 = 4e-3;

use designs::{kernels, Layouts};
use gpu_common::{assert_close, gpu, rmsnorm, Rng};
use pocketrt::gpu::code_texture::MatrixCodes;
use pocketrt::gpu::kernels::common::gemv::{GemvQ4, ResidualParts};
use pocketrt::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, GemvVariant};
use pocketrt::gpu::kernels::common::gemv_spec::{GpuRows, SlotReduce};
use pocketrt::gpu::kernels::{grid, run, MatrixFormat};
use pocketrt::quant::{Q4Tensor, Q8Tensor, QMatrix};

struct Case {
    n: usize,
    k: usize,
    epilogue: Epilogue,
    bias: bool,
    norm: bool,
}

/// What one GEMV run gave and should have given: the output, then the stored residual
/// x + Σ parts (empty when the kernel adds no parts).
struct Outcome {
    got: Vec<f32>,
    want: Vec<f32>,
    h_got: Vec<f32>,
    h_want: Vec<f32>,
}

/// Run one GEMV on the GPU (adding the kernel's `add_parts` random partial vectors to x)
/// and the reference on the CPU.
fn run_case(kernel: &GemvQ4, c: &Case, seed: u64) -> Outcome {
    let ctx = gpu();
    let mut rng = Rng::new(seed);
    let rows = c.n * c.epilogue.parts();
    let values = rng.vec(rows * c.k, 1.0);
    let w = match kernel.spec.format {
        MatrixFormat::Q4 => QMatrix::Q4(Q4Tensor::quantize(&values, rows, c.k).unwrap()),
        MatrixFormat::Q8 => QMatrix::Q8(Q8Tensor::quantize(&values, rows, c.k).unwrap()),
    };
    let h_in = rng.vec(c.k, 2.0);
    let norm_w = rng.vec(c.k, 1.5);
    let bias = if c.bias {
        rng.vec(rows, 1.0)
    } else {
        vec![0.0]
    };
    let out0 = rng.vec(c.n, 1.0);
    let n_parts = kernel.spec.add_parts;
    let parts = rng.vec(n_parts * c.k, 1.0);
    // The input: h + Σ parts, summed in f64.
    let x_in: Vec<f32> = (0..c.k)
        .map(|i| {
            let p: f64 = (0..n_parts).map(|p| f64::from(parts[p * c.k + i])).sum();
            (f64::from(h_in[i]) + p) as f32
        })
        .collect();
    // The fused norm's reference: rmsnorm in f64, rounded to f32.
    let x = if c.norm {
        rmsnorm(&x_in, &norm_w, EPS)
    } else {
        x_in.clone()
    };

    // Reference: f64 dot products of the dequantized rows.
    let mut row = vec![0f32; c.k];
    let dots: Vec<f32> = (0..rows)
        .map(|r| {
            w.dequantize_row(r, &mut row);
            let d: f64 = row
                .iter()
                .zip(&x)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            d as f32 + if c.bias { bias[r] } else { 0.0 }
        })
        .collect();
    let want: Vec<f32> = (0..c.n)
        .map(|o| match c.epilogue {
            Epilogue::Store | Epilogue::StoreArgmax => dots[o],
            Epilogue::AddInto => out0[o] + dots[o],
            Epilogue::SwiGlu => {
                let g = f64::from(dots[o]);
                (g / (1.0 + (-g).exp()) * f64::from(dots[c.n + o])) as f32
            }
        })
        .collect();

    let (codes, params) = match &w {
        QMatrix::Q4(q) => (&q.codes, &q.qparams),
        QMatrix::Q8(q) => (&q.codes, &q.scales),
    };
    let qparams = ctx.storage_init("qparams", params).unwrap();
    let codes = MatrixCodes::upload(ctx, kernel.codes_read(), codes, &qparams).unwrap();
    let xb = ctx.storage_init("x", &h_in).unwrap();
    let nb = ctx.storage_init("norm", &norm_w).unwrap();
    let bb = ctx.storage_init("bias", &bias).unwrap();
    let out = ctx.storage_init("out", &out0).unwrap();
    let norm = c.norm.then_some(&nb);
    let pb = ctx.storage_init("parts", &parts).unwrap();
    let h_out = ctx.storage("h out", 4 * c.k as u64).unwrap();
    let residual = (n_parts > 0).then_some(ResidualParts {
        parts: &pb,
        h_out: &h_out,
    });
    let d = kernel.dispatch_adding(ctx, codes.bind(), &qparams, &xb, norm, &bb, &out, residual);
    run(ctx, &[&d]);
    let (h_got, h_want) = match n_parts {
        0 => (vec![], vec![]),
        _ => (ctx.read_f32(&h_out, c.k).unwrap(), x_in),
    };
    Outcome {
        got: ctx.read_f32(&out, c.n).unwrap(),
        want,
        h_got,
        h_want,
    }
}

const EPS: f32 = 1e-6;

fn check(name: &str, c: Case, seed: u64, layouts: Layouts) {
    check_adding(name, c, 0, seed, layouts);
}

/// [`check`] with `add_parts` partial vectors added to x (and the sum stored).
fn check_adding(name: &str, c: Case, add_parts: usize, seed: u64, layouts: Layouts) {
    let formats = [MatrixFormat::Q4, MatrixFormat::Q8];
    let spec = |format| GemvSpec {
        n: c.n,
        k: c.k,
        epilogue: c.epilogue,
        bias: c.bias,
        norm_eps: c.norm.then_some(EPS),
        add_parts,
        format,
        row0: 0,
    };
    for (design, kernel) in formats.into_iter().flat_map(|f| kernels(spec(f), layouts)) {
        let r = run_case(&kernel, &c, seed);
        let what = format!("{name} {design}");
        let rel = if design.contains("f16: true") {
            F16_REL
        } else {
            2e-6
        };
        assert_close(&what, &r.got, &r.want, rel, 1e-6 * (c.k as f32).sqrt());
        assert_eq!(r.h_got.len(), if add_parts > 0 { c.k } else { 0 });
        assert_close(&format!("h_out {what}"), &r.h_got, &r.h_want, 1e-6, 1e-6);
    }
}

#[test]
fn gemv_matches_reference_when_rows_are_not_a_multiple_of_the_workgroup() {
    gemv_matches_reference_when_rows_are_not_a_multiple_of_the_workgroup_in(Layouts::Every);
}

fn gemv_matches_reference_when_rows_are_not_a_multiple_of_the_workgroup_in(layouts: Layouts) {
    let c = Case {
        n: 37,
        k: 896,
        epilogue: Epilogue::Store,
        bias: false,
        norm: false,
    };
    check("37 x 896", c, 1, layouts);
    let c = Case {
        n: 300,
        k: 640,
        epilogue: Epilogue::Store,
        bias: false,
        norm: false,
    };
    check("300 x 640", c, 2, layouts);
}

#[test]
fn gemv_matches_reference_with_k_64() {
    gemv_matches_reference_with_k_64_in(Layouts::Profiles);
}

fn gemv_matches_reference_with_k_64_in(layouts: Layouts) {
    check(
        "259 x 64",
        Case {
            n: 259,
            k: 64,
            epilogue: Epilogue::Store,
            bias: false,
            norm: false,
        },
        3,
        layouts,
    );
}

#[test]
fn gemv_bias_and_residual_add_epilogues_match_reference() {
    gemv_bias_and_residual_add_epilogues_match_reference_in(Layouts::Profiles);
}

fn gemv_bias_and_residual_add_epilogues_match_reference_in(layouts: Layouts) {
    check(
        "bias 70 x 128",
        Case {
            n: 70,
            k: 128,
            epilogue: Epilogue::Store,
            bias: true,
            norm: false,
        },
        4,
        layouts,
    );
    check(
        "add 70 x 192",
        Case {
            n: 70,
            k: 192,
            epilogue: Epilogue::AddInto,
            bias: false,
            norm: false,
        },
        5,
        layouts,
    );
    check(
        "add+bias 33 x 64",
        Case {
            n: 33,
            k: 64,
            epilogue: Epilogue::AddInto,
            bias: true,
            norm: false,
        },
        6,
        layouts,
    );
}

#[test]
fn gemv_fused_gate_up_swiglu_matches_reference() {
    gemv_fused_gate_up_swiglu_matches_reference_in(Layouts::Profiles);
}

fn gemv_fused_gate_up_swiglu_matches_reference_in(layouts: Layouts) {
    check(
        "swiglu 50 x 192",
        Case {
            n: 50,
            k: 192,
            epilogue: Epilogue::SwiGlu,
            bias: false,
            norm: false,
        },
        7,
        layouts,
    );
    check(
        "swiglu+bias 300 x 64",
        Case {
            n: 300,
            k: 64,
            epilogue: Epilogue::SwiGlu,
            bias: true,
            norm: false,
        },
        8,
        layouts,
    );
    // K 1,280: 20 groups, four per qparams texel in the tile order.
    check(
        "swiglu 70 x 1280",
        Case {
            n: 70,
            k: 1280,
            epilogue: Epilogue::SwiGlu,
            bias: false,
            norm: false,
        },
        9,
        layouts,
    );
}

#[test]
fn gemv_with_151936_rows_uses_a_2d_grid_and_matches_reference() {
    gemv_with_151936_rows_uses_a_2d_grid_and_matches_reference_in(Layouts::Profiles);
}

fn gemv_with_151936_rows_uses_a_2d_grid_and_matches_reference_in(layouts: Layouts) {
    let ctx = gpu();
    let n = 151_936;
    let spec = GemvSpec::new(n, 64, Epilogue::Store);
    // One row per workgroup (slots × rows per slot = 1) needs the 2-D grid.
    let one = GpuRows {
        tpr: 64,
        slots: 1,
        rps: 1,
        reduce: SlotReduce::Tree,
        f16: false,
        x_shared: false,
    };
    let coop = GemvQ4::new(ctx, GemvVariant::GpuRows(one), spec).unwrap();
    assert_eq!(grid(coop.workgroups()), [65_535, 3, 1]);
    check(
        "151936 x 64",
        Case {
            n,
            k: 64,
            epilogue: Epilogue::Store,
            bias: false,
            norm: false,
        },
        9,
        layouts,
    );
}

#[test]
fn gemv_rejects_k_not_a_multiple_of_64() {
    let spec = GemvSpec::new(8, 96, Epilogue::Store);
    let gpu_rows = GemvVariant::GpuRows(GpuRows {
        tpr: 16,
        slots: 8,
        rps: 2,
        reduce: SlotReduce::Tree,
        f16: false,
        x_shared: false,
    });
    for variant in [gpu_rows, GemvVariant::RowsFromTexture] {
        let r = GemvQ4::new(gpu(), variant, spec);
        assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
    }
}

#[test]
fn gemv_with_fused_rmsnorm_matches_norm_then_gemv_for_every_epilogue() {
    gemv_with_fused_rmsnorm_matches_norm_then_gemv_for_every_epilogue_in(Layouts::Profiles);
}

fn gemv_with_fused_rmsnorm_matches_norm_then_gemv_for_every_epilogue_in(layouts: Layouts) {
    for (i, (n, k, epilogue, bias)) in [
        (1152, 896, Epilogue::Store, false),
        (70, 128, Epilogue::Store, true),
        (300, 192, Epilogue::SwiGlu, false),
        (33, 64, Epilogue::AddInto, false),
    ]
    .into_iter()
    .enumerate()
    {
        let c = Case {
            n,
            k,
            epilogue,
            bias,
            norm: true,
        };
        check(
            &format!("norm {epilogue:?} {n} x {k}"),
            c,
            20 + i as u64,
            layouts,
        );
    }
}

#[test]
fn gemv_adding_parts_to_x_matches_reference_and_stores_the_sum() {
    gemv_adding_parts_to_x_matches_reference_and_stores_the_sum_in(Layouts::Profiles);
}

fn gemv_adding_parts_to_x_matches_reference_and_stores_the_sum_in(layouts: Layouts) {
    // Pocket's gate/up (x = h + 14 heads' parts, norm, SwiGLU) and smaller shapes with
    // every epilogue; each in every variant and layout.
    for (i, (n, k, epilogue, norm, add)) in [
        (2560, 896, Epilogue::SwiGlu, true, 14),
        (50, 192, Epilogue::SwiGlu, true, 3),
        (70, 128, Epilogue::Store, false, 1),
        (33, 64, Epilogue::AddInto, true, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let c = Case {
            n,
            k,
            epilogue,
            bias: false,
            norm,
        };
        let name = format!("+{add} parts {epilogue:?} norm={norm} {n} x {k}");
        check_adding(&name, c, add, 40 + i as u64, layouts);
    }
}

#[test]
fn gemv_with_k_beyond_the_uniform_binding_limit_reads_x_from_storage() {
    gemv_with_k_beyond_the_uniform_binding_limit_reads_x_from_storage_in(Layouts::Profiles);
}

fn gemv_with_k_beyond_the_uniform_binding_limit_reads_x_from_storage_in(layouts: Layouts) {
    // 16,448 f32 = 65,792 bytes: over WebGPU's default 64 KiB uniform binding.
    let k = 16_448;
    assert!(4 * k as u64 > gpu().limits.max_uniform_buffer_binding_size);
    let c = Case {
        n: 40,
        k,
        epilogue: Epilogue::Store,
        bias: false,
        norm: true,
    };
    check("40 x 16448", c, 30, layouts);
}

/// Pocket's LM head (65,536 rows of K 896, the final norm fused): 4,096 workgroups of the
/// GPU design, a 1-D grid.
#[test]
fn gemv_on_the_pocket_head_shape_matches_reference() {
    gemv_on_the_pocket_head_shape_matches_reference_in(Layouts::Profiles);
}

fn gemv_on_the_pocket_head_shape_matches_reference_in(layouts: Layouts) {
    let g = GpuRows {
        tpr: 16,
        slots: 8,
        rps: 2,
        reduce: SlotReduce::Tree,
        f16: false,
        x_shared: false,
    };
    let spec = GemvSpec::new(65_536, 896, Epilogue::Store);
    let head = GemvQ4::new(gpu(), GemvVariant::GpuRows(g), spec).unwrap();
    assert_eq!(grid(head.workgroups()), [4096, 1, 1]);
    check(
        "head 65536 x 896",
        Case {
            n: 65_536,
            k: 896,
            epilogue: Epilogue::Store,
            bias: false,
            norm: true,
        },
        11,
        layouts,
    );
}

/// The staged-x and one-barrier designs (Q4 and Q8) at the edge shapes: rows not a
/// multiple of a workgroup's, K = 64, 896, 2,560 (staged) and 4,096 (too large to stage:
/// the plain design), the fused norm, partial vectors (Pocket's gate/up: 14 parts, SwiGLU),
/// bias and the residual add, and Pocket's head (65,536 rows of 896, norm fused).
#[test]
fn gemv_staging_x_or_reducing_in_one_barrier_matches_reference() {
    let staged = Layouts::Staged;
    gemv_matches_reference_when_rows_are_not_a_multiple_of_the_workgroup_in(staged);
    gemv_matches_reference_with_k_64_in(staged);
    gemv_bias_and_residual_add_epilogues_match_reference_in(staged);
    gemv_with_fused_rmsnorm_matches_norm_then_gemv_for_every_epilogue_in(staged);
    gemv_adding_parts_to_x_matches_reference_and_stores_the_sum_in(staged);
    for (i, (n, k, epilogue)) in [
        (70, 2560, Epilogue::Store),
        (45, 2560, Epilogue::SwiGlu),
        (19, 4096, Epilogue::AddInto),
    ]
    .into_iter()
    .enumerate()
    {
        let c = Case {
            n,
            k,
            epilogue,
            bias: false,
            norm: true,
        };
        let name = format!("staged norm {epilogue:?} {n} x {k}");
        check_adding(&name, c, 2, 60 + i as u64, staged);
    }
    gemv_on_the_pocket_head_shape_matches_reference_in(staged);
}

/// Every case above in every design and layout (the default tier runs each layout once,
/// on the first test's cases).
#[test]
#[ignore = "long tier: every GEMV layout on every case"]
fn every_case_in_every_layout_long() {
    gemv_matches_reference_with_k_64_in(Layouts::Every);
    gemv_bias_and_residual_add_epilogues_match_reference_in(Layouts::Every);
    gemv_fused_gate_up_swiglu_matches_reference_in(Layouts::Every);
    gemv_with_151936_rows_uses_a_2d_grid_and_matches_reference_in(Layouts::Every);
    gemv_with_fused_rmsnorm_matches_norm_then_gemv_for_every_epilogue_in(Layouts::Every);
    gemv_adding_parts_to_x_matches_reference_and_stores_the_sum_in(Layouts::Every);
    gemv_with_k_beyond_the_uniform_binding_limit_reads_x_from_storage_in(Layouts::Every);
    gemv_on_the_pocket_head_shape_matches_reference_in(Layouts::Every);
}
