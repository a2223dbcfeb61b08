//! The adjustments against hand-computed logits (each expected value worked out in the
//! comments from the formulas of the module doc, not by the code under test).

use crate::error::Error;
use crate::sampler::{Sampler, SamplerConfig, TokenLogprobs};

/// Six raw logits; repetition 2, frequency 0.5, presence 0.25 over the last 4 tokens;
/// biases 1.5 + 0.5 on token 2, -0.5 on token 4, 0.25 on token 1.
fn penalised(logprobs: Option<usize>) -> Sampler {
    let mut s = Sampler::new(SamplerConfig {
        repetition_penalty: 2.0,
        frequency_penalty: 0.5,
        presence_penalty: 0.25,
        penalty_last_n: 4,
        logit_bias: vec![(2, 1.5), (4, -0.5), (1, 0.25), (2, 0.5)],
        logprobs,
        ..SamplerConfig::greedy()
    })
    .unwrap();
    // The window keeps [3, 0, 2, 0]: token 5 has left it.
    s.observe(&[5, 3]);
    s.observe(&[0, 2, 0]);
    s
}

const RAW: [f32; 6] = [2.0, -1.0, -1.0, 3.0, 0.0, 1.0];

/// By hand: t0 (twice in the window): 2 / 2 - (2 · 0.5 + 0.25) = -0.25; t1 (bias only):
/// -1 + 0.25 = -0.75; t2 (once, biased): (-1 + 2) / 2 - (0.5 + 0.25) = -0.25 (the bias
/// comes first: penalising first would give -1 · 2 + 2 - 0.75 = -0.75); t3 (once):
/// 3 / 2 - 0.75 = 0.75; t4 (bias only): -0.5; t5 (out of the window): 1.
const ADJUSTED: [f32; 6] = [-0.25, -0.75, -0.25, 0.75, -0.5, 1.0];

#[test]
fn bias_then_repetition_then_frequency_and_presence_over_the_window() {
    let s = penalised(None);
    let mut got = RAW;
    for a in s.adjustments(RAW.len()).unwrap() {
        got[a.token as usize] = a.apply(got[a.token as usize]);
    }
    assert_eq!(got, ADJUSTED);
    // Greedy is the argmax of the adjusted logits (token 5), not of the raw ones (3).
    assert_eq!(penalised(None).sample_logits(&RAW).unwrap(), 5);
}

#[test]
fn logprobs_are_the_log_softmax_of_the_adjusted_logits() {
    let mut s = penalised(Some(3));
    assert_eq!(s.sample_logits(&RAW).unwrap(), 5);
    let log_z = ADJUSTED
        .iter()
        .map(|&v| f64::from(v).exp())
        .sum::<f64>()
        .ln();
    let lp = |t: usize| (f64::from(ADJUSTED[t]) - log_z) as f32;
    let got = s.take_logprobs().unwrap();
    let want = TokenLogprobs {
        token: 5,
        logprob: lp(5),
        // Tokens 0 and 2 tie at -0.25: the lower id first.
        top: vec![(5, lp(5)), (3, lp(3)), (0, lp(0))],
    };
    assert_eq!(got.token, want.token);
    let close = |a: f32, b: f32| (a - b).abs() < 1e-6;
    assert!(close(got.logprob, want.logprob), "{got:?} vs {want:?}");
    assert_eq!(got.top.len(), 3);
    for (g, w) in got.top.iter().zip(&want.top) {
        assert!(g.0 == w.0 && close(g.1, w.1), "{got:?} vs {want:?}");
    }
    // Taken once.
    assert!(s.take_logprobs().is_none());
}

#[test]
fn no_window_means_no_penalties_and_bias_ids_must_be_in_the_vocabulary() {
    let off = SamplerConfig {
        repetition_penalty: 2.0,
        presence_penalty: 1.0,
        penalty_last_n: 0,
        ..SamplerConfig::greedy()
    };
    let mut s = Sampler::new(off).unwrap();
    s.observe(&[3, 3, 3]);
    assert!(s.adjustments(6).unwrap().is_empty());
    assert_eq!(s.candidates_needed(), None);
    assert_eq!(s.sample_logits(&RAW).unwrap(), 3);
    // Token 6 of a 6-token vocabulary: an error at step time, not at validation.
    let outside = SamplerConfig {
        logit_bias: vec![(6, 1.0)],
        ..SamplerConfig::greedy()
    };
    let mut s = Sampler::new(outside).unwrap();
    assert!(matches!(
        s.sample_logits(&RAW),
        Err(Error::InvalidArgument(m)) if m.contains("token 6")
    ));
}
