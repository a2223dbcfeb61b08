use super::*;

fn config(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> SamplerConfig {
    SamplerConfig {
        temperature,
        top_k,
        top_p,
        seed,
        ..SamplerConfig::greedy()
    }
}

fn sampler(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
    Sampler::new(config(temperature, top_k, top_p, seed)).unwrap()
}

/// Frequencies of each token over `n` draws from `logits`.
fn frequencies(s: &mut Sampler, logits: &[f32], n: usize) -> Vec<f64> {
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..n {
        counts[s.sample_logits(logits).unwrap() as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / n as f64).collect()
}

fn softmax_t(logits: &[f32], t: f64) -> Vec<f64> {
    let e: Vec<f64> = logits.iter().map(|&v| (f64::from(v) / t).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

fn assert_freq(got: &[f64], want: &[f64]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() < 0.015,
            "token {i}: frequency {g:.4}, expected {w:.4}"
        );
    }
}

#[test]
fn greedy_takes_the_first_largest_and_skips_nan() {
    let mut s = Sampler::new(SamplerConfig::greedy()).unwrap();
    assert_eq!(
        s.sample_logits(&[0.5, f32::NAN, 2.0, 2.0, -1.0]).unwrap(),
        2
    );
    // top_k = 1 is greedy whatever the temperature.
    let mut s = sampler(1.5, 1, 1.0, 3);
    assert_eq!(s.sample_logits(&[0.1, 0.3, 0.2]).unwrap(), 1);
    assert!(s.sample_logits(&[f32::NAN]).is_err());
}

#[test]
fn sampling_follows_the_softmax_at_the_temperature() {
    let logits = [2.0, 1.0, 0.0, -1.0, 0.5];
    for t in [1.0f32, 0.5, 2.0] {
        let mut s = sampler(t, 0, 1.0, 42);
        let got = frequencies(&mut s, &logits, 40_000);
        assert_freq(&got, &softmax_t(&logits, f64::from(t)));
    }
}

#[test]
fn top_k_keeps_only_the_k_largest_renormalised() {
    let logits = [2.0, 1.0, 0.0, -1.0, 0.5];
    let mut s = sampler(1.0, 3, 1.0, 7);
    let got = frequencies(&mut s, &logits, 40_000);
    let kept = softmax_t(&[2.0, 1.0, 0.5], 1.0);
    assert_freq(&got, &[kept[0], kept[1], 0.0, 0.0, kept[2]]);
}

#[test]
fn top_p_keeps_the_shortest_prefix_reaching_p() {
    // Probabilities 0.5, 0.3, 0.15, 0.05: p = 0.75 keeps the first two (0.8 ≥ 0.75).
    let logits: Vec<f32> = [0.5f32, 0.3, 0.15, 0.05].iter().map(|p| p.ln()).collect();
    let mut s = sampler(1.0, 0, 0.75, 11);
    let got = frequencies(&mut s, &logits, 40_000);
    assert_freq(&got, &[0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]);
    // A tiny p still keeps the best token.
    let mut s = sampler(1.0, 0, 1e-6, 11);
    assert_eq!(frequencies(&mut s, &logits, 100)[0], 1.0);
}

#[test]
fn a_seed_reproduces_its_sequence_and_seeds_differ() {
    let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 100) as f32 / 25.0).collect();
    let draw = |seed| {
        let mut s = sampler(1.0, 0, 0.95, seed);
        (0..64)
            .map(|_| s.sample_logits(&logits).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
}

#[test]
fn sorted_candidates_give_the_same_tokens_as_full_logits() {
    let logits: Vec<f32> = (0..500)
        .map(|i| ((i * 7919) % 500) as f32 / 100.0)
        .collect();
    let mut full = sampler(0.8, 40, 0.9, 9);
    let mut topk = full.clone();
    let mut sorted: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &v)| (i as u32, v))
        .collect();
    sorted.sort_by(better);
    // The GPU hands over 64 candidates; the sampler uses its top 40 of them.
    sorted.truncate(64);
    for _ in 0..200 {
        assert_eq!(
            full.sample_logits(&logits).unwrap(),
            topk.sample_sorted(&sorted, None).unwrap()
        );
    }
}

#[test]
fn nonsense_settings_are_rejected() {
    for (t, p) in [
        (f32::NAN, 1.0),
        (-1.0, 1.0),
        (1.0, 0.0),
        (1.0, 1.5),
        (1.0, f32::NAN),
    ] {
        let c = SamplerConfig {
            temperature: t,
            top_k: 0,
            top_p: p,
            ..SamplerConfig::greedy()
        };
        assert!(
            matches!(Sampler::new(c), Err(Error::InvalidArgument(_))),
            "t={t} p={p}"
        );
    }
}

/// Probabilities 0.5, 0.3, 0.15, 0.05 as logits.
fn four() -> Vec<f32> {
    [0.5f32, 0.3, 0.15, 0.05].iter().map(|p| p.ln()).collect()
}

#[test]
fn min_p_keeps_tokens_within_a_factor_of_the_best_at_the_temperature() {
    let with = |t: f32, min_p: f32| {
        Sampler::new(SamplerConfig {
            min_p,
            ..config(t, 0, 1.0, 13)
        })
        .unwrap()
    };
    // T = 1, min_p 0.35: p ≥ 0.175 keeps 0.5 and 0.3.
    let got = frequencies(&mut with(1.0, 0.35), &four(), 40_000);
    assert_freq(&got, &[0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]);
    // T = 2: weights ∝ √p, relative to the best 1, 0.775, 0.548, 0.316; min_p 0.5 keeps
    // three (at T = 1 it would keep two: 0.15 / 0.5 = 0.3).
    let w = [0.5f64.sqrt(), 0.3f64.sqrt(), 0.15f64.sqrt()];
    let sum: f64 = w.iter().sum();
    let got = frequencies(&mut with(2.0, 0.5), &four(), 40_000);
    assert_freq(&got, &[w[0] / sum, w[1] / sum, w[2] / sum, 0.0]);
}

#[test]
fn min_p_applies_after_top_p() {
    // Top-p 0.6 over all four keeps 0.5 + 0.3 (0.5 alone is short of 0.6), min-p 0.35
    // keeps both. Min-p first would renormalise to 0.625 / 0.375, and top-p 0.6 would
    // then keep only the first.
    let mut s = Sampler::new(SamplerConfig {
        min_p: 0.35,
        ..config(1.0, 0, 0.6, 17)
    })
    .unwrap();
    let got = frequencies(&mut s, &four(), 40_000);
    assert_freq(&got, &[0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]);
}

#[test]
fn sampled_logprobs_ignore_the_temperature_and_the_truncation() {
    let logits: Vec<f32> = (0..50).map(|i| ((i * 13) % 50) as f32 / 10.0).collect();
    let log_z = logits.iter().map(|&v| f64::from(v).exp()).sum::<f64>().ln();
    let mut by_value: Vec<usize> = (0..logits.len()).collect();
    by_value.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    let mut s = Sampler::new(SamplerConfig {
        logprobs: Some(2),
        ..config(0.7, 3, 1.0, 21)
    })
    .unwrap();
    for _ in 0..20 {
        let token = s.sample_logits(&logits).unwrap();
        let lp = s.take_logprobs().unwrap();
        let want = |t: usize| (f64::from(logits[t]) - log_z) as f32;
        assert_eq!(lp.token, token);
        assert!((lp.logprob - want(token as usize)).abs() < 1e-5, "{lp:?}");
        let top: Vec<u32> = lp.top.iter().map(|&(t, _)| t).collect();
        assert_eq!(top, [by_value[0] as u32, by_value[1] as u32]);
        assert!((lp.top[1].1 - want(by_value[1])).abs() < 1e-5);
    }
}

#[test]
fn candidates_needed_say_what_each_setting_needs() {
    let needed = |c: SamplerConfig| Sampler::new(c).unwrap().candidates_needed();
    let g = SamplerConfig::greedy;
    // Plain greedy: the argmax, pipelined.
    assert_eq!(needed(g()), None);
    // Greedy with penalties or bias: the best adjusted candidate.
    let rep = SamplerConfig {
        repetition_penalty: 1.1,
        ..g()
    };
    assert_eq!(needed(rep), Some(1));
    let bias = SamplerConfig {
        logit_bias: vec![(1, -100.0)],
        ..g()
    };
    assert_eq!(needed(bias), Some(1));
    // Logprobs: as many alternatives (at least one, for the normaliser and the token).
    let lp = |n| SamplerConfig {
        logprobs: Some(n),
        ..g()
    };
    assert_eq!(needed(lp(0)), Some(1));
    assert_eq!(needed(lp(5)), Some(5));
    let sampled = |k, n| SamplerConfig {
        logprobs: n,
        ..config(0.8, k, 1.0, 0)
    };
    assert_eq!(needed(sampled(10, Some(20))), Some(20));
    assert_eq!(needed(sampled(40, Some(3))), Some(40));
    assert_eq!(needed(sampled(0, Some(3))), Some(0));
}

#[test]
fn out_of_range_controls_are_rejected_naming_the_field() {
    let g = SamplerConfig::greedy;
    let cases = [
        ("min_p", SamplerConfig { min_p: 1.5, ..g() }),
        ("min_p", SamplerConfig { min_p: -0.1, ..g() }),
        (
            "repetition_penalty",
            SamplerConfig {
                repetition_penalty: 0.0,
                ..g()
            },
        ),
        (
            "repetition_penalty",
            SamplerConfig {
                repetition_penalty: f32::NAN,
                ..g()
            },
        ),
        (
            "frequency_penalty",
            SamplerConfig {
                frequency_penalty: 2.5,
                ..g()
            },
        ),
        (
            "presence_penalty",
            SamplerConfig {
                presence_penalty: -2.01,
                ..g()
            },
        ),
        (
            "logit_bias",
            SamplerConfig {
                logit_bias: vec![(3, 100.5)],
                ..g()
            },
        ),
        (
            "logprobs",
            SamplerConfig {
                logprobs: Some(21),
                ..g()
            },
        ),
    ];
    for (field, c) in cases {
        match Sampler::new(c) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(field), "{m}"),
            other => panic!("{field}: {other:?}"),
        }
    }
    // The edges are allowed.
    let edges = SamplerConfig {
        min_p: 1.0,
        frequency_penalty: -2.0,
        presence_penalty: 2.0,
        logit_bias: vec![(0, -100.0)],
        logprobs: Some(20),
        ..g()
    };
    assert!(Sampler::new(edges).is_ok());
}

#[test]
fn adjusted_sorted_candidates_give_the_same_tokens_and_logprobs_as_raw_logits() {
    // What the GPU does: adjust in place, read back the 64 best and the normaliser.
    let logits: Vec<f32> = (0..300).map(|i| ((i * 7919) % 300) as f32 / 60.0).collect();
    let c = SamplerConfig {
        repetition_penalty: 1.3,
        frequency_penalty: 0.4,
        presence_penalty: 0.2,
        logit_bias: vec![(7, 3.0), (299, -5.0)],
        min_p: 0.05,
        logprobs: Some(4),
        ..config(0.9, 30, 0.95, 3)
    };
    let (mut raw, mut gpu) = (Sampler::new(c.clone()).unwrap(), Sampler::new(c).unwrap());
    for _ in 0..100 {
        let mut adjusted = logits.clone();
        for a in gpu.adjustments(logits.len()).unwrap() {
            adjusted[a.token as usize] = a.apply(adjusted[a.token as usize]);
        }
        let log_z = adjusted.iter().map(|v| v.exp()).sum::<f32>().ln();
        let mut sorted: Vec<(u32, f32)> = (0..).zip(adjusted).collect();
        sorted.sort_by(better);
        sorted.truncate(64);
        let want = raw.sample_logits(&logits).unwrap();
        let got = gpu.sample_sorted(&sorted, Some(log_z)).unwrap();
        assert_eq!(got, want);
        let (a, b) = (raw.take_logprobs().unwrap(), gpu.take_logprobs().unwrap());
        assert!((a.logprob - b.logprob).abs() < 1e-4, "{a:?} {b:?}");
        for s in [&mut raw, &mut gpu] {
            s.observe(&[want]);
        }
    }
}

#[test]
fn gpu_draws_are_the_samplers_draws_for_plain_sampling_only() {
    let plain = SamplerConfig {
        min_p: 0.05,
        ..config(0.8, 40, 0.9, 17)
    };
    let sorted: Vec<(u32, f32)> = (0..40).map(|i| (100 + i, -0.1 * i as f32)).collect();
    // The GPU's numbers continue the sampler's generator: the same draws, step for step.
    let mut s = Sampler::new(plain.clone()).unwrap();
    let mut draws = s.gpu_draws(64).expect("plain sampling draws on the GPU");
    for _ in 0..50 {
        let want = s.sample_sorted(&sorted, None).unwrap();
        let r = draws.next_uniform();
        let got = sorted[draw(&draws.config, &sorted, r)].0;
        assert_eq!(got, want);
    }
    // Greedy, adjustments, logprobs, a grammar-free but too-wide top-k: step by step.
    let cases = [
        SamplerConfig::greedy(),
        SamplerConfig {
            logit_bias: vec![(3, 1.0)],
            ..plain.clone()
        },
        SamplerConfig {
            repetition_penalty: 1.1,
            ..plain.clone()
        },
        SamplerConfig {
            logprobs: Some(2),
            ..plain.clone()
        },
        SamplerConfig {
            top_k: 0,
            ..plain.clone()
        },
        SamplerConfig {
            top_k: 65,
            ..plain.clone()
        },
    ];
    for c in cases {
        assert!(
            Sampler::new(c.clone()).unwrap().gpu_draws(64).is_none(),
            "{c:?}"
        );
    }
}
