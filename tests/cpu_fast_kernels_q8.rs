//! The fast CPU backend's Q8 g32 kernels (`Packed` from a `Q8Tensor`: the codes permuted
//! into the activations' nibble order) on every kernel this CPU runs (scalar and the AVX2
//! family on x86-64; NEON and wasm run the scalar Q8 kernel), in both input precisions:
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
//! Also built for wasm32 by `examples/wasm_kernels.rs` (the scalar Q8 kernel under simd128).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[path = "gpu_common/mod.rs"]
mod gpu_common;

use gpu_common::Rng;
use pocketrt::cpu::fast::{
    gemm, gemm_swiglu, gemv, gemv_swiglu, Acts, Format, Kernel, Packed, Precision, TILE,
};
use pocketrt::cpu::Weight;
use pocketrt::quant::{Q4Tensor, Q8Tensor, Q8_GROUP};

const PRECISIONS: [Precision; 2] = [Precision::Int8, Precision::F32];

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

/// Activations with a spread of block magnitudes and one outlier per 300 elements.
fn random_x(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = rng.uniform() * (1.0 + (i / 64 % 5) as f32);
            if i % 300 == 7 {
                v * 20.0
            } else {
                v
            }
        })
        .collect()
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
    for (r, (exact, mag, bound)) in reference(&w, &x, &acts).into_iter().enumerate() {
        let (f, o) = (f64::from(fast[r]), f64::from(oracle[r]));
        let slack = 1e-5 * mag;
        assert!(
            (f - exact).abs() <= slack,
            "{what} row {r}: {f} vs exact product {exact} (tolerance {slack:e})"
        );
        assert!(
            (f - o).abs() <= bound + slack,
            "{what} row {r}: {f} vs oracle {o}: off by {:e} > rounding bound {bound:e}",
            (f - o).abs()
        );
    }
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
            let acts = Acts::new(precision, &x);
            let run = |k: Kernel| {
                let mut out = vec![0.0f32; rows];
                gemv(k, &w, &acts, &mut out);
                out
            };
            let scalar = run(Kernel::Scalar);
            for k in Kernel::available() {
                let what = format!("q8 {} {} {rows}×{cols}", k.name(), precision.name());
                match precision {
                    Precision::Int8 => {
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&run(k)), bits(&scalar), "{what}");
                    }
                    Precision::F32 => gpu_common::assert_close(&what, &run(k), &scalar, 1e-5, 1e-6),
                }
            }
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
                let (mut prod, mut fused) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * rows]);
                gemm(kernel, &gate, &acts, &mut prod);
                gemm_swiglu(kernel, &gate, &up, &acts, &mut fused);
                for (t, a) in acts.iter().enumerate() {
                    let what = format!(
                        "q8 {} {} {rows}×{cols} token {t}/{n}",
                        kernel.name(),
                        precision.name()
                    );
                    let (mut want, mut want_fused) = (vec![0.0f32; rows], vec![0.0f32; rows]);
                    gemv(kernel, &gate, a, &mut want);
                    gemv_swiglu(kernel, &gate, &up, a, &mut want_fused);
                    assert_eq!(&prod[t * rows..][..rows], &want[..], "{what}: gemm");
                    assert_eq!(
                        &fused[t * rows..][..rows],
                        &want_fused[..],
                        "{what}: gemm_swiglu"
                    );
                }
            }
        }
    }
}
