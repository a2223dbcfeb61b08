//! Speculative decoding's verification step on the GPU (`GpuModel::verify_logits`,
//! `verify_argmax` and their async forms): the last token plus drafts at positions
//! `pos..pos + n` in one submit. On the tiny Qwen2 fixture, in the test adapter's profile
//! and the `gpu` profile (whose head fuses the argmax): every row against the CPU oracle
//! (tolerance as tests/gpu_prefill.rs) and bit for bit against decode steps at the same
//! positions; the argmaxes equal the rows' argmax; a verification after the position moved
//! back (rejected drafts) equals a fresh run's; n = 1 is a decode step; one submit per
//! step; bad input is a typed error. In the long tier, the real Qwen2.5-Coder GGUF: every
//! verified row and argmax equals decode's bit for bit over 3 prompts' greedy
//! continuations (and prints how far batched prefill's rows are from decode's).

mod gpu_common;
mod real_data;

use gpu_common::{assert_close, gpu, logits_rel, profiles, Rng};
use pocketrt::cpu::{Model, WeightMode};
use pocketrt::format::open;
use pocketrt::gpu::forward::VERIFY_MAX_TOKENS;
use pocketrt::gpu::{GpuModel, ProfiledContext};
use pocketrt::Error;
use std::path::PathBuf;
use std::sync::Arc;

const CONTEXT: usize = 48;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(name)
}

fn load(ctx: &Arc<ProfiledContext>, context: usize) -> GpuModel {
    let src = &mut *open(&fixture("qwen2")).unwrap();
    GpuModel::load(ctx.clone(), src, context).unwrap()
}

fn tokens(vocab: usize, n: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() % vocab as u64) as u32)
        .collect()
}

/// The greedy choice of a logits row: the lowest index of the largest value.
fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// The test adapter's own profile and the `gpu` profile (fused head argmax), once each.
fn verify_profiles() -> Vec<Arc<ProfiledContext>> {
    let mut out = vec![gpu().clone()];
    if gpu().profile.name != "gpu" {
        let named = profiles().iter().find(|c| c.profile.name == "gpu");
        out.push(named.expect("the gpu profile runs everywhere").clone());
    }
    out
}

#[test]
fn verify_rows_equal_the_oracle_and_decode_steps_bit_for_bit() {
    let src = &mut *open(&fixture("qwen2")).unwrap();
    let oracle = Model::load(src, WeightMode::Q4).unwrap();
    for ctx in verify_profiles() {
        let name = ctx.profile.name;
        let mut model = load(&ctx, CONTEXT);
        let vocab = model.config.vocab_size;
        let seq = tokens(vocab, 20, 3);
        // Decode steps: the reference rows, bit for bit.
        let decoded: Vec<Vec<f32>> = (0..seq.len())
            .map(|pos| model.decode_with_logits(seq[pos], pos).unwrap().1)
            .collect();
        // The same positions again, in verification steps of 1, 4 and 8 positions (and
        // 7, the rest): KV rows rewritten with the same values.
        let mut cache = oracle.new_cache(CONTEXT).unwrap();
        let rel = logits_rel(ctx.profile.shader_f16);
        let mut pos = 0;
        for n in [1, 4, 8, 7] {
            let part = &seq[pos..pos + n];
            let before = model.submits();
            let rows = model.verify_logits(part, pos).unwrap();
            assert_eq!(model.submits() - before, 1, "{name}: one submit for {n}");
            assert_eq!(rows.len(), n * vocab);
            let greedy = model.verify_argmax(part, pos).unwrap();
            for (i, row) in rows.chunks_exact(vocab).enumerate() {
                let at = pos + i;
                let want = oracle.forward(seq[at], &mut cache).unwrap();
                let what = format!("{name} verify of {n} vs oracle pos {at}");
                assert_close(&what, row, &want, rel, 1e-4);
                assert!(
                    row == decoded[at].as_slice(),
                    "{name}: verify row at {at} differs from decode's"
                );
                assert_eq!(greedy[i], argmax(row), "{name}: argmax at {at}");
            }
            pos += n;
        }
        assert_eq!(pos, seq.len());
        // n = 1 after the sequence: a decode step's logits (the next position).
        let next = model.verify_logits(&[5], pos).unwrap();
        let (token, step) = model.decode_with_logits(5, pos).unwrap();
        assert!(next == step, "{name}: n = 1 is a decode step");
        assert_eq!(model.verify_argmax(&[5], pos).unwrap(), [token]);
    }
}

#[test]
fn verify_after_moving_back_overwrites_the_rejected_rows() {
    for ctx in verify_profiles() {
        let name = ctx.profile.name;
        let mut model = load(&ctx, CONTEXT);
        let vocab = model.config.vocab_size;
        let prompt = tokens(vocab, 6, 5);
        let drafts = tokens(vocab, 5, 7);
        let fixed = tokens(vocab, 4, 9);
        let p = prompt.len();
        model.verify_argmax(&prompt, 0).unwrap();
        // The last prompt token and 5 drafts, of which 2 are accepted: the position
        // moves back to p + 2 and the next step starts there with other tokens.
        let mut step = vec![prompt[p - 1]];
        step.extend(&drafts);
        model.verify_argmax(&step, p - 1).unwrap();
        let got = model.verify_logits(&fixed, p + 2).unwrap();
        // A fresh model that never saw the rejected drafts.
        let mut fresh = load(&ctx, CONTEXT);
        let mut seq = prompt.clone();
        seq.extend(&drafts[..2]);
        fresh.verify_argmax(&seq, 0).unwrap();
        let want = fresh.verify_logits(&fixed, p + 2).unwrap();
        assert_eq!(got.len(), fixed.len() * vocab);
        assert!(got == want, "{name}: rows after moving back differ");
        // The history does matter: other accepted tokens give other rows.
        seq.truncate(p);
        seq.extend(&drafts[2..4]);
        fresh.verify_argmax(&seq, 0).unwrap();
        let other = fresh.verify_logits(&fixed, p + 2).unwrap();
        assert!(other != want, "{name}: the check sees the history");
    }
}

#[test]
fn async_verification_equals_the_blocking_one() {
    let ctx = gpu();
    let mut model = load(ctx, CONTEXT);
    let seq = tokens(model.config.vocab_size, 6, 11);
    let rows = model.verify_logits(&seq, 0).unwrap();
    let greedy = model.verify_argmax(&seq, 0).unwrap();
    let rows_async = pollster::block_on(model.verify_logits_async(&seq, 0)).unwrap();
    let greedy_async = pollster::block_on(model.verify_argmax_async(&seq, 0)).unwrap();
    assert!(rows == rows_async);
    assert_eq!(greedy, greedy_async);
}

#[test]
fn verify_bad_input_is_a_typed_error() {
    let mut model = load(gpu(), 16);
    let vocab = model.config.vocab_size as u32;
    let bad = |r: Result<Vec<u32>, Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(bad(model.verify_argmax(&[], 0)));
    assert!(bad(model.verify_argmax(&[1, vocab], 0)));
    assert!(bad(model.verify_argmax(&[1; VERIFY_MAX_TOKENS + 1], 0)));
    assert!(matches!(
        model.verify_logits(&[1; 4], 13),
        Err(Error::ContextTooLong { context: 16, .. })
    ));
    assert!(matches!(
        pollster::block_on(model.verify_argmax_async(&[1], 16)),
        Err(Error::ContextTooLong { context: 16, .. })
    ));
    // The last positions of the context work.
    assert_eq!(model.verify_argmax(&[1; 4], 12).unwrap().len(), 4);
}

/// The real coder's greedy continuation of `prompt` by decode steps: (the sequence, each
/// position's logits).
fn decoded(model: &mut GpuModel, prompt: &[u32], new: usize) -> (Vec<u32>, Vec<Vec<f32>>) {
    let mut seq = prompt.to_vec();
    let mut rows = vec![];
    for pos in 0..prompt.len() + new - 1 {
        let (next, logits) = model.decode_with_logits(seq[pos], pos).unwrap();
        if pos + 1 >= seq.len() {
            seq.push(next);
        }
        rows.push(logits);
    }
    (seq, rows)
}

#[test]
#[ignore = "long tier: the real 0.5B model on a CPU adapter (~2 min of lavapipe)"]
fn verify_on_the_real_coder_equals_decode_bit_for_bit_long() {
    let src = &mut *open(&real_data::coder_gguf()).unwrap();
    let tok = pocketrt::tokenizer::Tokenizer::from_hf_json(&src.tokenizer_json().unwrap().unwrap())
        .unwrap();
    let new = 24;
    let mut model = GpuModel::load(gpu().clone(), src, 96).unwrap();
    let vocab = model.config.vocab_size;
    let texts = [
        "def fibonacci(n):",
        "The capital of France is",
        "fn main() {\n    let v: Vec<u32> =",
    ];
    for text in texts {
        let prompt = tok.encode(text, false);
        let (seq, rows) = decoded(&mut model, &prompt, new);
        // Verification steps of 5 positions over the same sequence (the KV rows rewritten).
        let (mut flips, mut err) = (0, 0f32);
        for start in (0..rows.len()).step_by(5) {
            let part = &seq[start..rows.len().min(start + 5)];
            let got = model.verify_logits(part, start).unwrap();
            let greedy = model.verify_argmax(part, start).unwrap();
            for (i, row) in got.chunks_exact(vocab).enumerate() {
                let want = &rows[start + i];
                err = err.max(
                    row.iter()
                        .zip(want)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f32::max),
                );
                flips += usize::from(greedy[i] != argmax(want));
            }
        }
        println!("{text:?}: verify vs decode: {flips} argmax differences, max |Δ| {err:e}");
        assert_eq!((flips, err), (0, 0.0), "{text:?}");
        // For the record: batched prefill's rows (GEMMs) against decode's (GEMVs).
        let batched = model.prefill_all_logits(&seq[..rows.len()], 0).unwrap();
        let (mut flips, mut err) = (0, 0f32);
        for (row, want) in batched.iter().zip(&rows) {
            err = err.max(
                row.iter()
                    .zip(want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max),
            );
            flips += usize::from(argmax(row) != argmax(want));
        }
        println!(
            "{text:?}: batched prefill vs decode over {} positions: {flips} argmax differences, \
             max |Δ| {err:e}",
            rows.len()
        );
    }
}
