//! The CPU oracle against HF transformers on tiny random qwen3 / qwen2 / llama models
//! (fixtures and the script that made them: tests/fixtures/oracle/).
//!
//! Tolerances: f32 logits within 1e-4 absolute of transformers' at every position (the
//! two sides differ only in summation order); greedy continuations identical (the
//! fixtures record a smallest greedy top-2 margin ≥ 0.002, far above that).
//!
//! Q4 g64 mode is checked twice: exactly (Q4 mode equals f32 mode on the dequantized
//! weights, within 1e-5), and for closeness to f32 mode on the original weights (relative
//! RMS logit error < 0.35, and f32's top-1 token among Q4's top 5 at ≥ 5/6 of the positions:
//! these random Gaussian weights lose ~9% RMS per weight to 4 bits, and their logits are
//! close together, so exact top-1 agreement is only reported).

mod oracle_common;

use oracle_common::{load_expected, load_hf_fixture, max_abs_diff};
use pocketrt::cpu::{MemorySource, Model, WeightMode};
use pocketrt::format::ModelSource;

const LOGIT_TOLERANCE: f32 = 1e-4;
/// Q4 g64 of Gaussian random weights: ~9% RMS error per weight (step = range / 15).
const Q4_MAX_REL_RMS: f64 = 0.35;

fn model(name: &str, mode: WeightMode) -> Model {
    Model::load(&mut load_hf_fixture(name), mode).unwrap()
}

/// The oracle's logits at every position of `tokens`, through the KV cache.
fn logits(model: &Model, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut cache = model.new_cache(tokens.len()).unwrap();
    tokens
        .iter()
        .map(|&t| model.forward(t, &mut cache).unwrap())
        .collect()
}

fn check_logits_match_transformers(name: &str) {
    let exp = load_expected(name);
    let got = logits(&model(name, WeightMode::F32), &exp.tokens);
    let per_pos: Vec<f32> = got
        .iter()
        .zip(&exp.logits)
        .map(|(g, e)| max_abs_diff(g, e))
        .collect();
    let worst = per_pos.iter().copied().fold(0.0, f32::max);
    println!(
        "{name}: max |oracle - transformers| = {worst:.2e} over {} positions ({})",
        per_pos.len(),
        exp.versions
    );
    assert!(
        worst <= LOGIT_TOLERANCE,
        "{name}: logits differ from transformers by {worst:e} (tolerance {LOGIT_TOLERANCE:e}); \
         per position: {per_pos:?}"
    );
}

fn check_greedy_matches_transformers(name: &str) {
    let exp = load_expected(name);
    let got = model(name, WeightMode::F32)
        .greedy(&exp.tokens, exp.greedy.len())
        .unwrap();
    assert_eq!(got, exp.greedy, "{name}: greedy continuation differs");
}

#[test]
fn qwen3_logits_match_transformers_at_every_position() {
    check_logits_match_transformers("qwen3");
}

#[test]
fn qwen2_logits_match_transformers_at_every_position() {
    check_logits_match_transformers("qwen2");
}

#[test]
fn llama_logits_match_transformers_at_every_position() {
    check_logits_match_transformers("llama");
}

#[test]
fn greedy_continuations_match_transformers_exactly() {
    for name in ["qwen3", "qwen2", "llama"] {
        check_greedy_matches_transformers(name);
    }
}

/// How far Q4 mode's logits are from f32 mode's over one fixture sequence.
struct Q4Drift {
    max_abs: f32,
    rel_rms: f64,
    same_top1: usize,
    /// Positions where f32's top-1 token is among Q4's top 5.
    top1_in_top5: usize,
    positions: usize,
}

fn q4_drift(name: &str) -> Q4Drift {
    let tokens = load_expected(name).tokens;
    let f32_logits = logits(&model(name, WeightMode::F32), &tokens);
    let q4_logits = logits(&model(name, WeightMode::Q4), &tokens);
    let (mut max_abs, mut err_sq, mut ref_sq) = (0.0f32, 0.0f64, 0.0f64);
    let (mut same_top1, mut top1_in_top5) = (0, 0);
    for (a, b) in f32_logits.iter().zip(&q4_logits) {
        max_abs = max_abs.max(max_abs_diff(a, b));
        for (x, y) in a.iter().zip(b) {
            err_sq += f64::from(x - y).powi(2);
            ref_sq += f64::from(*x).powi(2);
        }
        let top = argmax(a).unwrap();
        same_top1 += usize::from(argmax(b) == Some(top));
        top1_in_top5 += usize::from(b.iter().filter(|&&v| v > b[top]).count() < 5);
    }
    Q4Drift {
        max_abs,
        rel_rms: (err_sq / ref_sq).sqrt(),
        same_top1,
        top1_in_top5,
        positions: tokens.len(),
    }
}

#[test]
fn q4_mode_stays_close_to_f32_mode() {
    let drifts: Vec<(&str, Q4Drift)> = ["qwen3", "qwen2", "llama"]
        .into_iter()
        .map(|name| (name, q4_drift(name)))
        .collect();
    for (name, d) in &drifts {
        println!(
            "{name}: Q4 g64 vs f32 logits: max abs error {:.3}, relative RMS error {:.3}; \
             same top-1 at {}/{n} positions, f32's top-1 in Q4's top-5 at {}/{n}",
            d.max_abs,
            d.rel_rms,
            d.same_top1,
            d.top1_in_top5,
            n = d.positions
        );
    }
    for (name, d) in &drifts {
        assert!(
            d.rel_rms < Q4_MAX_REL_RMS,
            "{name}: Q4 logits off by {} RMS",
            d.rel_rms
        );
        assert!(
            6 * d.top1_in_top5 >= 5 * d.positions,
            "{name}: f32's top-1 is in Q4's top-5 at only {}/{} positions",
            d.top1_in_top5,
            d.positions
        );
    }
}

#[test]
fn q4_mode_computes_exactly_what_f32_mode_computes_on_the_dequantized_weights() {
    // Same numbers through the two weight paths: Q4 (dequantized row by row inside the
    // matvec) and f32 holding those dequantized values. Only rounding order may differ.
    let mut src = load_hf_fixture("qwen3");
    let mut roundtrip = MemorySource::new(src.config().clone());
    for t in src.tensors().to_vec() {
        let data = if t.shape.len() == 2 {
            src.read_q4(&t.name).unwrap().0.dequantize()
        } else {
            src.read_f32(&t.name).unwrap()
        };
        roundtrip.insert(&t.name, t.shape, data).unwrap();
    }
    let tokens = load_expected("qwen3").tokens;
    let q4 = logits(&Model::load(&mut src, WeightMode::Q4).unwrap(), &tokens);
    let f32_of_q4 = logits(
        &Model::load(&mut roundtrip, WeightMode::F32).unwrap(),
        &tokens,
    );
    let worst = q4
        .iter()
        .zip(&f32_of_q4)
        .map(|(a, b)| max_abs_diff(a, b))
        .fold(0.0, f32::max);
    assert!(
        worst < 1e-5,
        "Q4 path differs from f32 on the same weights by {worst}"
    );
}

fn argmax(x: &[f32]) -> Option<usize> {
    pocketrt::cpu::ops::argmax(x)
}
