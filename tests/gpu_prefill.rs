//! Batched prefill (`GpuModel::prefill*`) on the tiny fixture models of all three
//! architectures, in every device profile forced on the test adapter: the logits at every
//! position equal the CPU oracle's (Q4 weights on both sides) and token-by-token GPU
//! decoding's, across several chunks and when a prefill continues an earlier one;
//! decoding continues correctly after a prefill; bad input is a typed error.
//!
//! Tolerance as tests/gpu_forward.rs (f16 KV cache on the GPU, f32 in the oracle):
//! max abs err ≤ 1e-3 · max|logit| + 1e-4 per position, 4e-3 · max|logit| where the
//! profile computes in f16 (`gpu_common::logits_rel`).

mod gpu_common;

use gpu_common::{assert_close, gpu, logits_rel, profiles, Rng};
use pocketrt::cpu::{Model, WeightMode};
use pocketrt::format::open;
use pocketrt::gpu::{GpuModel, ProfiledContext};
use pocketrt::quant::WeightFormat;
use pocketrt::Error;
use std::path::PathBuf;
use std::sync::Arc;

/// Longer than one chunk (256) so that the prompt spans two.
const CONTEXT: usize = 320;
const PROMPT: usize = 300;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(name)
}

fn load_on(ctx: &Arc<ProfiledContext>, name: &str, context: usize) -> GpuModel {
    load_as(ctx, name, context, WeightFormat::Q4)
}

fn load_as(ctx: &Arc<ProfiledContext>, name: &str, context: usize, w: WeightFormat) -> GpuModel {
    let src = &mut *open(&fixture(name)).unwrap();
    GpuModel::load_as(ctx.clone(), src, context, w, Default::default()).unwrap()
}

fn load(name: &str, context: usize) -> GpuModel {
    load_on(gpu(), name, context)
}

fn prompt(vocab: usize, n: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() % vocab as u64) as u32)
        .collect()
}

fn check_model(name: &str) {
    check_model_as(name, WeightFormat::Q4);
}

/// [`check_model`] with the matrices as `weights` holds them, on both sides.
fn check_model_as(name: &str, weights: WeightFormat) {
    let mode = match weights {
        WeightFormat::Q4 => WeightMode::Q4,
        WeightFormat::Q8 => WeightMode::Q8,
        WeightFormat::Keep => WeightMode::Keep,
    };
    let oracle = Model::load(&mut *open(&fixture(name)).unwrap(), mode).unwrap();
    for ctx in profiles() {
        let what = format!("{name} {weights:?} profile {}", ctx.profile.name);
        check_model_on(ctx, &what, (name, weights), &oracle);
    }
}

fn check_model_on(
    ctx: &Arc<ProfiledContext>,
    name: &str,
    (fixture_name, weights): (&str, WeightFormat),
    oracle: &Model,
) {
    let mut cache = oracle.new_cache(CONTEXT).unwrap();
    let load = |name: &str, context| load_as(ctx, name, context, weights);
    let mut model = load(fixture_name, CONTEXT);
    assert_eq!(model.prefill_chunk_len(), ctx.profile.prefill_chunk);
    // The CPU adapters' Q8 GEMM is the workgroup-tiles design, which they run slower
    // than decode steps: there prompts go token by token (the batched path is still
    // tested here, called directly).
    let pays = !(model.holds_q8() && ctx.profile.gemm.is_lanes());
    assert_eq!(
        model.prefill_pays(),
        pays,
        "{name}: batched prefill is the profile's choice"
    );
    let tokens = prompt(model.config.vocab_size, PROMPT, 1);

    let all = model.prefill_all_logits(&tokens, 0).unwrap();
    assert_eq!(all.len(), PROMPT);
    let rel = logits_rel(ctx.profile.shader_f16);
    let mut stepper = load(fixture_name, CONTEXT);
    for (pos, (&t, got)) in tokens.iter().zip(&all).enumerate() {
        let want = oracle.forward(t, &mut cache).unwrap();
        assert_close(
            &format!("{name} prefill vs oracle pos {pos}"),
            got,
            &want,
            rel,
            1e-4,
        );
        let (_, step) = stepper.decode_with_logits(t, pos).unwrap();
        assert_close(
            &format!("{name} prefill vs decode pos {pos}"),
            got,
            &step,
            rel,
            1e-4,
        );
    }
    drop(stepper);

    // Decoding continues after the prefill: the next step sees the whole prompt.
    let next = 7u32;
    let want = oracle.forward(next, &mut cache).unwrap();
    let (_, got) = model.decode_with_logits(next, PROMPT).unwrap();
    assert_close(
        &format!("{name} decode after prefill"),
        &got,
        &want,
        1e-3,
        1e-4,
    );

    // A prefill that continues an earlier one (prefix reuse), in two calls, and the
    // one-submit-per-chunk feed: the same last logits.
    let mut split = load(fixture_name, CONTEXT);
    split.prefill_feed(&tokens[..100], 0).unwrap();
    let before = split.submits();
    let last = split.prefill(&tokens[100..], 100).unwrap();
    assert_eq!(
        split.submits() - before,
        2,
        "200 tokens: one chunk, then the head"
    );
    assert_close(
        &format!("{name} split prefill"),
        &last,
        &all[PROMPT - 1],
        1e-5,
        1e-6,
    );
}

#[test]
fn qwen3_prefill_matches_the_oracle_and_token_by_token_decoding() {
    check_model("qwen3");
}

#[test]
fn qwen2_prefill_with_bias_and_untied_head_matches_the_oracle_and_decoding() {
    check_model("qwen2");
}

#[test]
fn llama_prefill_matches_the_oracle_and_token_by_token_decoding() {
    check_model("llama");
}

/// Q8 g32 matrices: the Q8 GEMMs and the prefill embedding gather of Q8 rows.
#[test]
fn q8_prefill_matches_the_q8_oracle_and_decoding() {
    check_model_as("qwen2", WeightFormat::Q8);
}

#[test]
fn prefill_bad_input_is_a_typed_error() {
    let mut model = load("llama", 16);
    assert!(matches!(
        model.prefill(&[], 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        model.prefill(&[1, 512], 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        model.prefill(&[1; 10], 7),
        Err(Error::ContextTooLong { context: 16, .. })
    ));
    // A prompt that exactly fills the context works.
    assert_eq!(
        model.prefill(&[1; 16], 0).unwrap().len(),
        model.config.vocab_size
    );
}
