//! The CPU oracle against HF transformers on tiny random qwen3 / qwen2 / llama models
//! (fixtures and the script that made them: tests/fixtures/oracle/).
//!
//! Tolerances: f32 logits within 1e-4 absolute of transformers' at every position (the
//! two sides differ only in summation order); greedy continuations identical (the
//! fixtures record a smallest greedy top-2 margin ≥ 0.002, far above that). Q4 g64 mode:
//! logits within 0.25 absolute of f32 mode and the same top-1 token on ≥ 75% of
//! positions (4-bit weights change these random models' near-tied choices).

mod oracle_common;

use oracle_common::{load_expected, load_hf_fixture, max_abs_diff};
use pocketrt::cpu::{MemorySource, Model, WeightMode};
use pocketrt::format::ModelSource;

const LOGIT_TOLERANCE: f32 = 1e-4;

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

#[test]
fn q4_mode_stays_close_to_f32_and_mostly_picks_the_same_token() {
    for name in ["qwen3", "qwen2", "llama"] {
        let exp = load_expected(name);
        let f32_logits = logits(&model(name, WeightMode::F32), &exp.tokens);
        let q4_logits = logits(&model(name, WeightMode::Q4), &exp.tokens);
        let mut worst = 0.0f32;
        let mut same_top1 = 0;
        for (a, b) in f32_logits.iter().zip(&q4_logits) {
            worst = worst.max(max_abs_diff(a, b));
            same_top1 += usize::from(argmax(a) == argmax(b));
        }
        let n = exp.tokens.len();
        println!("{name}: Q4 g64 vs f32: max abs logit error {worst:.4}, top-1 agrees {same_top1}/{n}");
        assert!(worst < 0.25, "{name}: Q4 logits off by {worst}");
        assert!(4 * same_top1 >= 3 * n, "{name}: top-1 agrees only {same_top1}/{n}");
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
    let f32_of_q4 = logits(&Model::load(&mut roundtrip, WeightMode::F32).unwrap(), &tokens);
    let worst = q4
        .iter()
        .zip(&f32_of_q4)
        .map(|(a, b)| max_abs_diff(a, b))
        .fold(0.0, f32::max);
    assert!(worst < 1e-5, "Q4 path differs from f32 on the same weights by {worst}");
}

fn argmax(x: &[f32]) -> Option<usize> {
    pocketrt::cpu::ops::argmax(x)
}
