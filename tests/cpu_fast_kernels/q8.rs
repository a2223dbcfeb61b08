//! The fast CPU backend's Q8 g32 kernels (`Packed` from a `Q8Tensor`: the codes permuted
//! into the activations' nibble order) on every kernel this CPU runs (scalar and the AVX2
//! family on x86-64, NEON and NEON dotprod on aarch64, simd128 on wasm), in both input precisions:
//!
//! 1. Exact math: `Σ_g scale·d·Σ code·q` (int8) or `Σ_g scale·Σ code·x` (f32) to f32
//!    accuracy (≤ 1e-5 of the terms' magnitudes, computed in f64), and against the
//!    oracle's f32 GEMV (`Weight::Q8`) within the activation-rounding bound
//!    `Σ_i |scale·code_i|·|x_i − d·q_i|` (zero in f32), at edge shapes: K of 32 and 96
//!    (an odd group count: a half-padded last block), one row, rows not a multiple of the
//!    split, K = 896 and 2,560.
//! 2. Every int8 kernel gives the scalar kernel's results bit for bit (f32: close).
//! 3. The tiles (`gemm`, `gemm_swiglu`, 1..=TILE tokens and partial tiles, a Q8 gate with a
//!    Q4 up) give every token its own GEMV exactly.
//!
//! A submodule of tests/cpu_fast_kernels.rs, whose helpers it shares; so also built for
//! wasm32 by `examples/wasm_kernels.rs` (the simd128 Q8 tile, under node).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::gpu_common::Rng;
use super::{
    assert_gemm_gives_every_token_its_gemv, assert_kernels_agree_with_scalar,
    assert_within_rounding_bound, random_x, PRECISIONS,
};
use pocketrt::cpu::fast::{gemv, Acts, Format, Kernel, Packed, Precision, TILE};
use pocketrt::cpu::Weight;
use pocketrt::quant::{Q4Tensor, Q8Tensor, Q8_GROUP};

/// Rows of random values, each row's groups of a spread of magnitudes (some with a 20×
/// outlier) so that their scales differ.
fn random_q8(rng: &mut Rng, rows: usize, cols: usize) -> Q8Tensor {
    let data: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let v = rng.uniform() * (3.0 / cols as f32).sqrt() * (1.0 + (i / 32 % 3) as f32);
            if i % 211 == 5 {
                v * 20.0
            } else {
                v
            }
        })
        .collect();
    Q8Tensor::quantize(&data, rows, cols).unwrap()
}

/// Per row: (exact product of the weights and the prepared activations in f64, its
/// magnitude, the activation-rounding bound).
fn reference(w: &Q8Tensor, x: &[f32], a: &Acts) -> Vec<(f64, f64, f64)> {
    let groups = w.cols / Q8_GROUP;
    (0..w.rows)
        .map(|r| {
            let (mut exact, mut mag, mut bound) = (0.0, 0.0, 0.0);
            for g in 0..groups {
                let scale = f64::from(w.scale(r * groups + g));
                for (j, &c) in w.group_codes(r * groups + g).iter().enumerate() {
                    let i = g * Q8_GROUP + j;
                    let sc = scale * f64::from(c);
                    let (q, xi) = (f64::from(a.value(i)), f64::from(x[i]));
                    exact += sc * q;
                    mag += (sc * q).abs() + (sc * xi).abs();
                    bound += sc.abs() * (xi - q).abs();
                }
            }
            (exact, mag, bound)
        })
        .collect()
}

fn check(kernel: Kernel, precision: Precision, rows: usize, cols: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let w = random_q8(&mut rng, rows, cols);
    let x = random_x(&mut rng, cols);
    let acts = Acts::new(precision, &x);
    let mut fast = vec![f32::NAN; rows];
    gemv(kernel, &Packed::from(&w), &acts, &mut fast);
    let mut oracle = vec![0.0f32; rows];
    Weight::Q8(w.clone()).matvec(&x, &mut oracle);

    let what = format!("q8 {} {} {rows}×{cols}", kernel.name(), precision.name());
    assert_within_rounding_bound(&what, &fast, &oracle, &reference(&w, &x, &acts));
}

#[test]
fn q8_kernels_match_the_exact_product_and_the_oracle_within_the_rounding_bound() {
    let shapes = [(1, 32), (3, 64), (5, 96), (37, 160), (515, 896), (64, 2560)];
    for kernel in Kernel::available() {
        for precision in PRECISIONS {
            for (i, &(rows, cols)) in shapes.iter().enumerate() {
                check(kernel, precision, rows, cols, 200 + i as u64);
            }
        }
    }
}

#[test]
fn q8_kernels_agree_with_the_scalar_one_int8_bit_for_bit() {
    for (rows, cols) in [(515, 896), (77, 96), (33, 64)] {
        let mut rng = Rng::new(rows as u64);
        let w = Packed::from(&random_q8(&mut rng, rows, cols));
        assert_eq!(w.format, Format::Q8);
        let x = random_x(&mut rng, cols);
        for precision in PRECISIONS {
            assert_kernels_agree_with_scalar(
                "q8 ",
                (&w).into(),
                &Acts::new(precision, &x),
                precision,
            );
        }
    }
}

/// Batched prefill's products on Q8 rows: every token of a chunk gets exactly its own
/// GEMV, for 1..=TILE tokens and chunks that leave partial tiles, rows that leave partial
/// blocks and tasks, K of 96; `gemm_swiglu` with a Q8 gate and a Q4 up (a keep model's
/// mix) as well as both Q8.
#[test]
fn q8_gemm_gives_every_token_its_own_gemv_exactly() {
    let mut cases: Vec<(usize, usize, usize)> = (1..=TILE).map(|n| (37, 96, n)).collect();
    cases.extend([(1, 64, 1), (100, 128, 5), (515, 896, 9)]);
    for kernel in Kernel::available() {
        for precision in PRECISIONS {
            for &(rows, cols, n) in &cases {
                let mut rng = Rng::new(rows as u64 + 7 * n as u64);
                let gate = Packed::from(&random_q8(&mut rng, rows, cols));
                let up = match cols % 64 {
                    0 => Packed::from(
                        Q4Tensor::quantize(&rng.vec(rows * cols, 0.1), rows, cols).unwrap(),
                    ),
                    _ => Packed::from(&random_q8(&mut rng, rows, cols)),
                };
                let acts: Vec<Acts> = (0..n)
                    .map(|_| Acts::new(precision, &random_x(&mut rng, cols)))
                    .collect();
                let what = format!("q8 {} {} {rows}×{cols}", kernel.name(), precision.name());
                assert_gemm_gives_every_token_its_gemv(
                    &what,
                    kernel,
                    (&gate).into(),
                    (&up).into(),
                    &acts,
                );
            }
        }
    }
}
