use super::*;

fn sampler(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
    Sampler::new(SamplerConfig {
        temperature,
        top_k,
        top_p,
        seed,
        ..SamplerConfig::greedy()
    })
    .unwrap()
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
            topk.sample_sorted(&sorted).unwrap()
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
