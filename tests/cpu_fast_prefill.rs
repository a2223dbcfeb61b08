//! Batched prefill on the fast CPU backend (`FastModel::prefill`) on the tiny fixture
//! models of all three architectures (Q4 g64 weights; Q8 g32 on qwen2: bias, untied
//! head), on every kernel this CPU runs, in both input precisions, with a chunk of `CHUNK` tokens and prompts of 1, CHUNK − 1, CHUNK, CHUNK + 1
//! and 2·CHUNK + 3 tokens (partial, whole and several chunks):
//! 1. logits at every position against the oracle (`cpu::Model`, token by token), within
//!    the decode tests' tolerances (tests/cpu_fast_model.rs);
//! 2. logits at every position against the fast backend's own token-by-token decode:
//!    the same prepared inputs and integer sums, so equal up to f32 summation order
//!    (≤ 1e-5 · max|logit|; measured: bit-equal);
//! 3. a prefill that continues a cache (from position CHUNK + 1), returning only the last
//!    position's logits, and a decode step after it, against the oracle.

#[path = "cpu_fast_common/mod.rs"]
mod cpu_fast_common;
#[path = "gpu_common/mod.rs"]
mod gpu_common;

use cpu_fast_common::{assert_logits_match, fast, fast_in, kernels_and_precisions, oracle};
use gpu_common::assert_close;
use pocketrt::cpu::fast::{Kernel, Logits, Precision};
use pocketrt::cpu::ops::argmax;
use pocketrt::cpu::WeightMode;

const CHUNK: usize = 8;
/// The decode tests' prompt (tests/cpu_fast_model.rs).
const PROMPT: [u32; 5] = [3, 141, 59, 26, 5];
const LENGTHS: [usize; 5] = [1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 3];
/// The longest prompt and one decode step after it.
const TOKENS: usize = 2 * CHUNK + 4;

fn check(name: &str, mode: WeightMode, kernel: Kernel, precision: Precision) {
    let oracle = oracle(name, mode);
    let model = fast_in(name, mode, kernel, precision).with_prefill_chunk(CHUNK);
    let vocab = model.config.vocab_size;
    let what = format!(
        "{name} {} {} {}",
        mode.name(),
        kernel.name(),
        precision.name()
    );
    // Token by token: the oracle's logits and the fast backend's own, on the decode
    // tests' prompt continued by the oracle's greedy tokens (the sequence their
    // tolerances were measured on).
    let (mut oc, mut fc) = (
        oracle.new_cache(TOKENS).unwrap(),
        model.new_cache(TOKENS).unwrap(),
    );
    let (mut prompt, mut want, mut decoded) = (vec![], vec![], vec![]);
    let mut token = PROMPT[0];
    while prompt.len() < TOKENS {
        prompt.push(token);
        want.push(oracle.forward(token, &mut oc).unwrap());
        decoded.push(model.forward(token, &mut fc).unwrap());
        let next = argmax(want.last().unwrap()).unwrap() as u32;
        token = *PROMPT.get(prompt.len()).unwrap_or(&next);
    }

    for n in LENGTHS {
        let mut cache = model.new_cache(TOKENS).unwrap();
        let got = model
            .prefill(&prompt[..n], &mut cache, Logits::All)
            .unwrap();
        assert_eq!(
            (got.len(), cache.len()),
            (n * vocab, n),
            "{what} prompt {n}"
        );
        for (pos, got) in got.chunks_exact(vocab).enumerate() {
            let at = format!("{what} prompt {n} pos {pos}");
            assert_logits_match(&at, precision, got, &want[pos]);
            assert_close(&format!("{at} vs decode"), got, &decoded[pos], 1e-5, 0.0);
        }
    }

    // Continue a cache: positions CHUNK + 1.. in one call, the last logits only.
    let split = CHUNK + 1;
    let last = TOKENS - 1;
    let mut cache = model.new_cache(TOKENS).unwrap();
    let none = model
        .prefill(&prompt[..split], &mut cache, Logits::None)
        .unwrap();
    assert!(none.is_empty(), "{what}: Logits::None returns nothing");
    let got = model
        .prefill(&prompt[split..last], &mut cache, Logits::Last)
        .unwrap();
    assert_logits_match(
        &format!("{what} continued"),
        precision,
        &got,
        &want[last - 1],
    );
    let step = model.forward(prompt[last], &mut cache).unwrap();
    assert_logits_match(&format!("{what} step after"), precision, &step, &want[last]);
}

fn check_all_kernels(name: &str, mode: WeightMode) {
    for (kernel, precision) in kernels_and_precisions() {
        check(name, mode, kernel, precision);
    }
}

#[test]
fn qwen3_prefill_matches_the_oracle_and_decode_at_every_position() {
    check_all_kernels("qwen3", WeightMode::Q4);
}

#[test]
fn qwen2_prefill_with_bias_and_untied_head_matches_the_oracle_and_decode() {
    check_all_kernels("qwen2", WeightMode::Q4);
}

#[test]
fn llama_prefill_matches_the_oracle_and_decode_at_every_position() {
    check_all_kernels("llama", WeightMode::Q4);
}

#[test]
fn qwen2_prefill_on_q8_weights_matches_the_oracle_and_decode() {
    check_all_kernels("qwen2", WeightMode::Q8);
}

#[test]
fn a_prompt_that_does_not_fit_or_a_bad_token_runs_nothing() {
    let model = fast("qwen3", Kernel::best(), Precision::Int8).with_prefill_chunk(CHUNK);
    let vocab = model.config.vocab_size as u32;
    let mut cache = model.new_cache(CHUNK).unwrap();
    assert!(model
        .prefill(&[1; CHUNK + 1], &mut cache, Logits::None)
        .is_err());
    assert!(model
        .prefill(&[1, vocab, 2], &mut cache, Logits::None)
        .is_err());
    assert_eq!(cache.len(), 0);
    model
        .prefill(&[1; CHUNK], &mut cache, Logits::None)
        .unwrap();
    assert!(model.prefill(&[1], &mut cache, Logits::Last).is_err());
}
