//! The fast CPU backend's GEMV kernels against the oracle's math, on every kernel this CPU
//! runs (scalar, and AVX2 / AVX-512 VNNI / AVX-VNNI or NEON / NEON dotprod) in both input precisions, through the threaded row
//! split, on random data and edge shapes (one group, fewer rows than a task, rows not a
//! multiple of the split, a 65,536-row head, K = 4,096); and the chunk products of batched
//! prefill (`gemm`, `gemm_swiglu`) against the GEMVs token by token.
//!
//! Claims, per output row:
//! 1. Exact math: the kernel computes `Σ_g scale·d·Σ code·q + min·sum` (int8: the Q4
//!    weights times the quantized activations) or `Σ_g scale·Σ code·x + min·sum` (f32) to
//!    f32 accuracy: ≤ 1e-5 of the sum of the terms' magnitudes, computed in f64.
//! 2. Against the oracle's f32 GEMV (`cpu::Weight::matvec`): they differ only by the
//!    activation rounding, so `|fast − oracle| ≤ Σ_i |scale·code_i|·|x_i − d·q_i|`, computed
//!    exactly per row (zero in f32), plus the same f32 slack. A wrong nibble, group, scale
//!    or row breaks this bound by orders of magnitude. In f32 the GPU GEMV tests'
//!    tolerance applies as well: ≤ 2e-6 · max|ref| + 1e-6 · sqrt(K) · max|x|. The int8
//!    relative RMS error is printed and must stay under 6% (random data whose blocks hold
//!    20× outliers, which coarsen the int8 step of their block: 1.5–4.5% measured).
//!
//! The same tests run on wasm32 (the simd128 kernel, and the relaxed-SIMD one in the build
//! with the feature `wasm-relaxed-simd`) under node through
//! wasm-bindgen-test (`examples/wasm_kernels.rs`, run by `scripts/test-wasm-kernels`
//! from `scripts/test`): there
//! `#[test]` is wasm-bindgen-test's attribute.
//!
//! The Q8 g32 rows' tests are the submodule `q8` (tests/cpu_fast_kernels/q8.rs), sharing
//! these helpers.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[path = "gpu_common/mod.rs"]
mod gpu_common;

use gpu_common::Rng;
use pocketrt::cpu::fast::{gemm, gemm_swiglu, gemv, gemv_swiglu, Acts, Kernel, Precision, Rows};
use pocketrt::cpu::ops::silu;
use pocketrt::cpu::Weight;
use pocketrt::quant::{unpack_codes8, unpack_params, Q4Tensor, GROUP};

#[path = "cpu_fast_kernels/q8.rs"]
mod q8;

const SHAPES: [(usize, usize); 7] = [
    (1, 64),
    (3, 64),
    (37, 128),
    (1007, 896),
    (333, 2560),
    (65536, 64),
    (64, 4096),
];

fn random_q4(rng: &mut Rng, rows: usize, cols: usize) -> Q4Tensor {
    let data = rng.vec(rows * cols, (3.0 / cols as f32).sqrt());
    Q4Tensor::quantize(&data, rows, cols).unwrap()
}

/// Activations with a spread of block magnitudes and one outlier per 300 elements.
fn random_x(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = rng.uniform() * (1.0 + (i / GROUP % 5) as f32);
            if i % 300 == 7 {
                v * 20.0
            } else {
                v
            }
        })
        .collect()
}

fn code(w: &Q4Tensor, row: usize, i: usize) -> f64 {
    let flat = row * w.cols + i;
    f64::from(unpack_codes8(w.codes[flat / 8])[flat % 8])
}

/// Per row: (exact int8 product in f64, its magnitude, the activation-rounding bound).
// `i` indexes the codes and the quantized activations as well as `x`.
#[allow(clippy::needless_range_loop)]
fn reference(w: &Q4Tensor, x: &[f32], a: &Acts) -> Vec<(f64, f64, f64)> {
    let groups = w.cols / GROUP;
    (0..w.rows)
        .map(|r| {
            let (mut exact, mut mag, mut bound) = (0.0, 0.0, 0.0);
            for g in 0..groups {
                let (scale, min) = unpack_params(w.qparams[r * groups + g]);
                let (scale, min) = (f64::from(scale), f64::from(min));
                let sum = f64::from(a.ds[g][1]);
                exact += min * sum;
                mag += (min * sum).abs();
                for (i, &xi) in x.iter().enumerate().skip(g * GROUP).take(GROUP) {
                    let sc = scale * code(w, r, i);
                    let q = f64::from(a.value(i));
                    exact += sc * q;
                    let xi = f64::from(xi);
                    mag += (sc * q).abs() + (sc * xi).abs() + (min * xi).abs();
                    bound += sc.abs() * (xi - q).abs();
                }
            }
            (exact, mag, bound)
        })
        .collect()
}

/// Claims 1 and 2 for every row: `fast` within f32 slack of the exact product and within
/// the activation-rounding bound of the oracle (`refs` from `reference`). Returns the
/// relative RMS error against the oracle.
fn assert_within_rounding_bound(
    what: &str,
    fast: &[f32],
    oracle: &[f32],
    refs: &[(f64, f64, f64)],
) -> f64 {
    let (mut err2, mut ref2) = (0.0f64, 0.0f64);
    for (r, &(exact, mag, bound)) in refs.iter().enumerate() {
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
        err2 += (f - o).powi(2);
        ref2 += o.powi(2);
    }
    (err2 / ref2).sqrt()
}

fn check(kernel: Kernel, precision: Precision, rows: usize, cols: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let w = random_q4(&mut rng, rows, cols);
    let x = random_x(&mut rng, cols);
    let acts = Acts::new(precision, &x);
    let mut fast = vec![f32::NAN; rows];
    gemv(kernel, &w, &acts, &mut fast);
    let mut oracle = vec![0.0f32; rows];
    Weight::q4("w", w.clone()).unwrap().matvec(&x, &mut oracle);

    let what = format!("{} {} {rows}×{cols}", kernel.name(), precision.name());
    let rel_rms = assert_within_rounding_bound(&what, &fast, &oracle, &reference(&w, &x, &acts));
    println!("{what}: relative RMS error vs the f32 oracle {rel_rms:.2e}");
    match precision {
        Precision::Int8 => assert!(rel_rms < 6e-2, "{what}: relative RMS error {rel_rms}"),
        Precision::F32 => {
            let xmax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let abs = 1e-6 * (cols as f32).sqrt() * xmax;
            gpu_common::assert_close(&what, &fast, &oracle, 2e-6, abs);
        }
    }
}

const PRECISIONS: [Precision; 2] = [Precision::Int8, Precision::F32];

#[test]
fn the_simd_kernel_is_available_where_the_cpu_has_it() {
    let names: Vec<_> = Kernel::available().iter().map(|k| k.name()).collect();
    println!("kernels: {names:?}, best {}", Kernel::best().name());
    assert_eq!(names[0], "scalar");
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        names.contains(&"avx2"),
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    );
    // AVX-512 VNNI where the CPU has it, on top of AVX2.
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        names.contains(&"avx512-vnni"),
        names.contains(&"avx2")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni"),
        "{names:?}"
    );
    // AVX-VNNI (read from CPUID) comes only on top of AVX2.
    assert!(
        !names.contains(&"avx-vnni") || names.contains(&"avx2"),
        "{names:?}"
    );
    #[cfg(target_arch = "aarch64")]
    assert!(names.contains(&"neon"));
    // The wasm tests exist for the simd128 kernel: a build without it fails here.
    #[cfg(target_arch = "wasm32")]
    assert!(
        names.contains(&"simd128"),
        "built without simd128: {names:?}"
    );
    // ... and the relaxed-SIMD ones for the relaxed-SIMD kernel, on top of simd128.
    #[cfg(all(target_arch = "wasm32", feature = "wasm-relaxed-simd"))]
    assert!(names.ends_with(&["simd128", "relaxed-simd"]), "{names:?}");
    // NEON dotprod (FEAT_DotProd, detected at run time) comes only on top of NEON.
    #[cfg(target_arch = "aarch64")]
    assert_eq!(
        names.contains(&"neon-dotprod"),
        std::arch::is_aarch64_feature_detected!("dotprod")
    );
}

#[test]
fn every_kernel_matches_the_exact_product_and_the_oracle_within_the_rounding_bound() {
    for kernel in Kernel::available() {
        for precision in PRECISIONS {
            for (i, &(rows, cols)) in SHAPES.iter().enumerate() {
                check(kernel, precision, rows, cols, 100 + i as u64);
            }
        }
    }
}

/// Claim 3 of the kernels: every kernel gives the scalar kernel's GEMV of `w` bit for bit
/// in int8 (the same integer sums scaled in the same order), close in f32.
fn assert_kernels_agree_with_scalar(what: &str, w: Rows, acts: &Acts, precision: Precision) {
    let run = |k: Kernel| {
        let mut out = vec![0.0f32; w.rows];
        gemv(k, w, acts, &mut out);
        out
    };
    let scalar = run(Kernel::Scalar);
    for k in Kernel::available() {
        let what = format!(
            "{what}{} {} {}×{}",
            k.name(),
            precision.name(),
            w.rows,
            64 * w.groups
        );
        match precision {
            Precision::Int8 => {
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&run(k)), bits(&scalar), "{what}");
            }
            Precision::F32 => gpu_common::assert_close(&what, &run(k), &scalar, 1e-5, 1e-6),
        }
    }
}

/// Batched prefill's products on one chunk: `gemm` and `gemm_swiglu` give every token
/// exactly its own `gemv` / `gemv_swiglu` (the same integer sums added in the same order).
fn assert_gemm_gives_every_token_its_gemv(
    what: &str,
    k: Kernel,
    gate: Rows,
    up: Rows,
    acts: &[Acts],
) {
    let (rows, n) = (gate.rows, acts.len());
    let (mut prod, mut fused) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * rows]);
    gemm(k, gate, acts, &mut prod);
    gemm_swiglu(k, gate, up, acts, &mut fused);
    for (t, a) in acts.iter().enumerate() {
        let what = format!("{what} token {t}/{n}");
        let (mut want, mut want_fused) = (vec![0.0f32; rows], vec![0.0f32; rows]);
        gemv(k, gate, a, &mut want);
        gemv_swiglu(k, gate, up, a, &mut want_fused);
        assert_eq!(&prod[t * rows..][..rows], &want[..], "{what}: gemm");
        assert_eq!(
            &fused[t * rows..][..rows],
            &want_fused[..],
            "{what}: gemm_swiglu"
        );
    }
}

#[test]
fn kernels_agree_with_the_scalar_one_int8_bit_for_bit() {
    let mut rng = Rng::new(5);
    let w = random_q4(&mut rng, 515, 896);
    let x = random_x(&mut rng, 896);
    for precision in PRECISIONS {
        let acts = Acts::new(precision, &x);
        assert_kernels_agree_with_scalar("", (&w).into(), &acts, precision);
    }
}

#[test]
fn fused_gate_up_swiglu_equals_its_parts() {
    for kernel in Kernel::available() {
        for (rows, cols) in [(1, 64), (100, 128), (2560, 896)] {
            let mut rng = Rng::new(rows as u64);
            let (gate, up) = (
                random_q4(&mut rng, rows, cols),
                random_q4(&mut rng, rows, cols),
            );
            let acts = Acts::new(Precision::Int8, &random_x(&mut rng, cols));
            let mut fused = vec![0.0f32; rows];
            gemv_swiglu(kernel, &gate, &up, &acts, &mut fused);
            let (mut g, mut u) = (vec![0.0f32; rows], vec![0.0f32; rows]);
            gemv(kernel, &gate, &acts, &mut g);
            gemv(kernel, &up, &acts, &mut u);
            let want: Vec<f32> = g.iter().zip(&u).map(|(g, u)| silu(*g) * u).collect();
            assert_eq!(fused, want, "{} {rows}×{cols}", kernel.name());
        }
    }
}

/// Batched prefill's products: a chunk of tokens through `gemm` / `gemm_swiglu` gives each
/// token exactly its own GEMV (the same integer sums added in the same order), for chunk
/// sizes that leave partial tiles and row counts that leave partial blocks and tasks.
#[test]
fn gemm_gives_every_token_its_own_gemv_exactly() {
    for kernel in Kernel::available() {
        for precision in PRECISIONS {
            for (rows, cols, n) in [(1, 64, 1), (37, 128, 3), (100, 128, 4), (515, 896, 9)] {
                let mut rng = Rng::new(rows as u64 + 7 * n as u64);
                let (gate, up) = (
                    random_q4(&mut rng, rows, cols),
                    random_q4(&mut rng, rows, cols),
                );
                let acts: Vec<Acts> = (0..n)
                    .map(|_| Acts::new(precision, &random_x(&mut rng, cols)))
                    .collect();
                let what = format!("{} {} {rows}×{cols}", kernel.name(), precision.name());
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
