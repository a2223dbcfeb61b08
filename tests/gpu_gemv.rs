//! Q4 g64 GEMV kernels (both variants, every epilogue) against the dequantized weights
//! (`Q4Tensor::dequantize_row`) with f64 sums on the CPU.
//! Tolerance: max abs err ≤ 2e-6 · max|ref| + 1e-6 · sqrt(K) (f32 accumulation of K
//! products of magnitude ≤ 1); a wrong code, param, row or epilogue is off by ≥ 1e-2.

mod gpu_common;

use gpu_common::{assert_close, gpu, Rng};
use pocketrt::gpu::kernels::gemv_q4::{Epilogue, GemvQ4, GemvVariant};
use pocketrt::gpu::kernels::{grid, run};
use pocketrt::quant::Q4Tensor;

const VARIANTS: [GemvVariant; 2] = [GemvVariant::RowsPerInvocation, GemvVariant::WorkgroupPerRow];

struct Case {
    n: usize,
    k: usize,
    epilogue: Epilogue,
    bias: bool,
}

/// Run one GEMV on the GPU and the reference on the CPU; returns (gpu, reference).
fn run_case(variant: GemvVariant, c: &Case, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let ctx = gpu();
    let mut rng = Rng::new(seed);
    let rows = c.n * c.epilogue.parts();
    let w = Q4Tensor::quantize(&rng.vec(rows * c.k, 1.0), rows, c.k).unwrap();
    let x = rng.vec(c.k, 1.0);
    let bias = if c.bias {
        rng.vec(rows, 1.0)
    } else {
        vec![0.0]
    };
    let out0 = rng.vec(c.n, 1.0);

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
            Epilogue::Store => dots[o],
            Epilogue::AddInto => out0[o] + dots[o],
            Epilogue::SwiGlu => {
                let g = f64::from(dots[o]);
                (g / (1.0 + (-g).exp()) * f64::from(dots[c.n + o])) as f32
            }
        })
        .collect();

    let kernel = GemvQ4::new(ctx, variant, c.n, c.k, c.epilogue, c.bias).unwrap();
    let codes = ctx.storage_init("codes", &w.codes).unwrap();
    let qparams = ctx.storage_init("qparams", &w.qparams).unwrap();
    let xb = ctx.storage_init("x", &x).unwrap();
    let bb = ctx.storage_init("bias", &bias).unwrap();
    let out = ctx.storage_init("out", &out0).unwrap();
    let d = kernel.dispatch(ctx, &codes, &qparams, &xb, &bb, &out);
    run(ctx, &[&d]);
    (ctx.read_f32(&out, c.n).unwrap(), want)
}

fn check(name: &str, c: Case, seed: u64) {
    for v in VARIANTS {
        let (got, want) = run_case(v, &c, seed);
        assert_close(
            &format!("{name} {v:?}"),
            &got,
            &want,
            2e-6,
            1e-6 * (c.k as f32).sqrt(),
        );
    }
}

#[test]
fn gemv_matches_reference_when_rows_are_not_a_multiple_of_the_workgroup() {
    let c = Case {
        n: 37,
        k: 896,
        epilogue: Epilogue::Store,
        bias: false,
    };
    check("37 x 896", c, 1);
    let c = Case {
        n: 300,
        k: 640,
        epilogue: Epilogue::Store,
        bias: false,
    };
    check("300 x 640", c, 2);
}

#[test]
fn gemv_matches_reference_with_k_64() {
    check(
        "259 x 64",
        Case {
            n: 259,
            k: 64,
            epilogue: Epilogue::Store,
            bias: false,
        },
        3,
    );
}

#[test]
fn gemv_bias_and_residual_add_epilogues_match_reference() {
    check(
        "bias 70 x 128",
        Case {
            n: 70,
            k: 128,
            epilogue: Epilogue::Store,
            bias: true,
        },
        4,
    );
    check(
        "add 70 x 192",
        Case {
            n: 70,
            k: 192,
            epilogue: Epilogue::AddInto,
            bias: false,
        },
        5,
    );
    check(
        "add+bias 33 x 64",
        Case {
            n: 33,
            k: 64,
            epilogue: Epilogue::AddInto,
            bias: true,
        },
        6,
    );
}

#[test]
fn gemv_fused_gate_up_swiglu_matches_reference() {
    check(
        "swiglu 50 x 192",
        Case {
            n: 50,
            k: 192,
            epilogue: Epilogue::SwiGlu,
            bias: false,
        },
        7,
    );
    check(
        "swiglu+bias 300 x 64",
        Case {
            n: 300,
            k: 64,
            epilogue: Epilogue::SwiGlu,
            bias: true,
        },
        8,
    );
}

#[test]
fn gemv_with_151936_rows_uses_a_2d_grid_and_matches_reference() {
    let ctx = gpu();
    let n = 151_936;
    let coop = GemvQ4::new(
        ctx,
        GemvVariant::WorkgroupPerRow,
        n,
        64,
        Epilogue::Store,
        false,
    )
    .unwrap();
    assert_eq!(grid(coop.workgroups()), [65_535, 3, 1]);
    check(
        "151936 x 64",
        Case {
            n,
            k: 64,
            epilogue: Epilogue::Store,
            bias: false,
        },
        9,
    );
}

#[test]
fn gemv_rejects_k_not_a_multiple_of_64() {
    let r = GemvQ4::new(
        gpu(),
        GemvVariant::RowsPerInvocation,
        8,
        96,
        Epilogue::Store,
        false,
    );
    assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
}
