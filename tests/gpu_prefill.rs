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
use pocketrt::format::source::open;
use pocketrt::gpu::{GpuContext, GpuModel};
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

fn load_on(ctx: &Arc<GpuContext>, name: &str, context: usize) -> GpuModel {
    GpuModel::load(ctx.clone(), &mut *open(&fixture(name)).unwrap(), context).unwrap()
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
    let oracle = Model::load(&mut *open(&fixture(name)).unwrap(), WeightMode::Q4).unwrap();
    for ctx in profiles() {
        let what = format!("{name} profile {}", ctx.profile.name);
        check_model_on(ctx, &what, name, &oracle);
    }
}

fn check_model_on(ctx: &Arc<GpuContext>, name: &str, fixture_name: &str, oracle: &Model) {
    let mut cache = oracle.new_cache(CONTEXT).unwrap();
    let load = |name: &str, context| load_on(ctx, name, context);
    let mut model = load(fixture_name, CONTEXT);
    assert_eq!(model.prefill_chunk_len(), ctx.profile.prefill_chunk);
    assert!(
        model.prefill_pays(),
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
