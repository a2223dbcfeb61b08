//! What the fast CPU backend's model tests share: the tiny fixture models on a chosen
//! kernel and precision, and the logits check against the oracle (tolerances in
//! tests/cpu_fast_model.rs).

#![allow(dead_code)]

use crate::gpu_common::assert_close;
use pocketrt::cpu::fast::{FastModel, Kernel, Precision};
use pocketrt::cpu::ops::argmax;
use pocketrt::cpu::{ModelWeights, WeightMode};
use pocketrt::format::open;
use std::path::PathBuf;

/// The int8 bound on the relative RMS logit error (tests/cpu_fast_model.rs says why).
pub const INT8_MAX_REL_RMS: f32 = 8e-2;

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(name)
}

pub fn fast(name: &str, kernel: Kernel, precision: Precision) -> FastModel {
    fast_in(name, WeightMode::Q4, kernel, precision)
}

/// [`fast`] with the matrices in `mode` (q4, q8 or keep).
pub fn fast_in(name: &str, mode: WeightMode, kernel: Kernel, precision: Precision) -> FastModel {
    let mut src = open(&fixture(name)).unwrap();
    let config = src.config().clone();
    let weights = ModelWeights::load(&mut *src, mode).unwrap();
    FastModel::from_weights(config, weights, kernel, precision).unwrap()
}

/// The oracle on the fixture `name` with the matrices in `mode`.
pub fn oracle(name: &str, mode: WeightMode) -> pocketrt::cpu::Model {
    pocketrt::cpu::Model::load(&mut *open(&fixture(name)).unwrap(), mode).unwrap()
}

/// Every kernel this CPU runs, each in both input precisions.
pub fn kernels_and_precisions() -> Vec<(Kernel, Precision)> {
    let precisions = [Precision::F32, Precision::Int8];
    let kernels = Kernel::available().into_iter();
    kernels.flat_map(|k| precisions.map(|p| (k, p))).collect()
}

pub fn rel_rms(got: &[f32], want: &[f32]) -> f32 {
    let e: f32 = got.iter().zip(want).map(|(g, w)| (g - w).powi(2)).sum();
    let r: f32 = want.iter().map(|w| w * w).sum();
    (e / r).sqrt()
}

/// The rank of `token` in `logits` (0 = the largest).
pub fn rank(logits: &[f32], token: usize) -> usize {
    logits.iter().filter(|&&v| v > logits[token]).count()
}

/// Fast-backend logits `got` against the oracle's `want` at one position: f32 within the
/// GPU tests' tolerance; int8 within the relative RMS bound with the oracle's top-1 in the
/// top 5. Returns the relative RMS error.
pub fn assert_logits_match(at: &str, precision: Precision, got: &[f32], want: &[f32]) -> f32 {
    let err = rel_rms(got, want);
    match precision {
        Precision::F32 => assert_close(at, got, want, 1e-3, 1e-4),
        Precision::Int8 => {
            assert!(err <= INT8_MAX_REL_RMS, "{at}: relative RMS error {err}");
            let best = argmax(want).unwrap();
            assert!(rank(got, best) < 5, "{at}: oracle's top-1 not in the top 5");
        }
    }
    err
}
