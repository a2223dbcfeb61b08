use super::*;
use crate::sampler::SamplerConfig;

#[test]
fn lookup_continues_the_most_recent_longest_match() {
    // "1 2 3 4 9 | 1 2 3 5 | 7 1 2 3": the last 3-gram [1 2 3] occurred at 5..8 (then 5)
    // and at 0..3 (then 4): the most recent wins.
    let seq = [1, 2, 3, 4, 9, 1, 2, 3, 5, 7, 1, 2, 3];
    assert_eq!(lookup(&seq, 3), vec![5, 7, 1]);
    // Limited by k and by the end of the sequence.
    assert_eq!(lookup(&seq, 1), vec![5]);
    assert_eq!(lookup(&[8, 1, 2, 8, 1, 2], 10), vec![8, 1, 2]);
    // No n-gram of two or more tokens occurred before: nothing (a single repeated token
    // is not enough).
    assert_eq!(lookup(&[1, 2, 3, 4, 1], 4), Vec::<u32>::new());
    assert_eq!(lookup(&[], 4), Vec::<u32>::new());
    assert_eq!(lookup(&[1, 2, 1, 2], 0), Vec::<u32>::new());
}

#[test]
fn lookup_prefers_a_longer_match_over_a_more_recent_shorter_one() {
    // The 4-gram [5 6 7 8] occurred first (then 1); only its tail [7 8] recurred later
    // (then 2): the longer match predicts.
    let seq = [5, 6, 7, 8, 1, 0, 7, 8, 2, 5, 6, 7, 8];
    assert_eq!(lookup(&seq, 1), vec![1]);
}

#[test]
fn draft_length_grows_shrinks_and_pauses() {
    let mut len = DraftLength::new(8);
    assert_eq!(len.for_step(), 4);
    len.observe(4, 4);
    assert_eq!(len.for_step(), 8);
    len.observe(8, 8);
    assert_eq!(len.for_step(), 8, "capped at the maximum");
    len.observe(8, 2);
    assert_eq!(len.for_step(), 3, "one past what was accepted");
    // All rejected: paused for 1 step, then 2, then 4 (consecutive failures double it).
    len.observe(3, 0);
    assert_eq!(len.for_step(), 0);
    assert_eq!(len.for_step(), 1);
    len.observe(1, 0);
    assert_eq!((len.for_step(), len.for_step(), len.for_step()), (0, 0, 1));
    len.observe(1, 0);
    assert_eq!(
        (0..4).map(|_| len.for_step()).collect::<Vec<_>>(),
        vec![0; 4]
    );
    assert_eq!(len.for_step(), 1);
    // An acceptance resets the pause.
    len.observe(1, 1);
    len.observe(2, 0);
    assert_eq!((len.for_step(), len.for_step()), (0, 1));
}

#[test]
fn proposals_take_the_grammar_first_then_lookup_within_room() {
    let mut sampler = Sampler::greedy();
    let mut drafter = Drafter::new(SpecOptions::lookup());
    let seq = [10, 11, 12, 13, 14, 10, 11];
    let p = drafter.propose(&seq, &mut sampler, None, 16).unwrap();
    assert_eq!(p.tokens, vec![12, 13, 14, 10], "half of 8 drafts to start");
    assert_eq!(p.forced, 0);
    let p = drafter.propose(&seq, &mut sampler, None, 2).unwrap();
    assert_eq!(p.tokens, vec![12, 13], "no further than the context's room");
    assert!(drafter
        .propose(&seq, &mut sampler, None, 0)
        .unwrap()
        .tokens
        .is_empty());
    drafter.observe(&p, 1);
    let s = drafter.stats();
    assert_eq!((s.drafted, s.accepted, s.steps), (2, 1, 1));
    assert!(SpecOptions {
        draft_max: 0,
        ..SpecOptions::lookup()
    }
    .validate()
    .is_err());
    assert!(SpecOptions {
        draft_max: 33,
        ..SpecOptions::lookup()
    }
    .validate()
    .is_err());
}

/// Pearson's chi-square of `counts` against the probabilities `p` (cells with p = 0 must
/// be empty).
fn chi_square(counts: &[usize], p: &[f64]) -> f64 {
    let n: usize = counts.iter().sum();
    counts
        .iter()
        .zip(p)
        .map(|(&c, &p)| {
            if p == 0.0 {
                assert_eq!(c, 0, "a token of probability 0 was drawn");
                0.0
            } else {
                let e = p * n as f64;
                (c as f64 - e).powi(2) / e
            }
        })
        .sum()
}

/// The sampler's distribution over a small vocabulary, computed exactly: the softmax at
/// the temperature over what top-k and top-p keep.
fn exact(logits: &[f32], c: &SamplerConfig) -> Vec<f64> {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    let w: Vec<f64> = order
        .iter()
        .map(|&i| (f64::from(logits[i] - logits[order[0]]) / f64::from(c.temperature)).exp())
        .collect();
    let total: f64 = w.iter().sum();
    let mut kept = w.len();
    let mut acc = 0.0;
    for (i, x) in w.iter().enumerate() {
        acc += x / total;
        if acc >= f64::from(c.top_p) {
            kept = i + 1;
            break;
        }
    }
    let mass: f64 = w[..kept].iter().sum();
    let mut p = vec![0.0; logits.len()];
    for (j, &i) in order[..kept].iter().enumerate() {
        p[i] = w[j] / mass;
    }
    p
}

/// 2,000 draws of one position with each draft: the chosen token's distribution is the
/// plain sampler's (chi-square, 7 degrees of freedom at most: 24.3 is p = 0.001), for a
/// likely draft, an unlikely one and one top-p cuts away; and the seeded draws repeat.
#[test]
fn drafted_choice_keeps_the_sampler_distribution() {
    let logits = [2.0f32, 1.5, 1.2, 0.3, 0.0, -0.5, -1.0, -4.0];
    let config = SamplerConfig {
        temperature: 0.9,
        top_p: 0.97,
        seed: 7,
        ..SamplerConfig::greedy()
    };
    let p = exact(&logits, &config);
    assert_eq!(p[7], 0.0, "top-p cuts the last token");
    let draws = 2000;
    let run = |draft: Option<u32>| {
        let mut s = Sampler::new(config.clone()).unwrap();
        let mut counts = vec![0usize; logits.len()];
        let mut hits = 0;
        for _ in 0..draws {
            let (t, hit) = s.choose_drafted(&logits, draft).unwrap();
            assert_eq!(hit, Some(t) == draft);
            hits += usize::from(hit);
            counts[t as usize] += 1;
        }
        (counts, hits)
    };
    let (plain, _) = run(None);
    let plain_chi = chi_square(&plain, &p);
    assert!(
        plain_chi < 24.3,
        "the plain sampler: chi-square {plain_chi:.1}"
    );
    for draft in [0u32, 3, 7] {
        let (counts, hits) = run(Some(draft));
        let chi = chi_square(&counts, &p);
        assert!(
            chi < 24.3,
            "draft {draft}: chi-square {chi:.1}, counts {counts:?}"
        );
        assert_eq!(hits, counts[draft as usize]);
        assert_eq!(run(Some(draft)), (counts, hits), "seeded draws repeat");
    }
    // A rule that always took the draft would be far off (the test can fail).
    let mut always = vec![0usize; logits.len()];
    always[3] = draws;
    assert!(chi_square(&always, &p) > 1000.0);
}

#[test]
fn greedy_drafted_choice_is_the_argmax() {
    let mut s = Sampler::greedy();
    let logits = [0.5f32, 3.0, 2.9, -1.0];
    assert_eq!(s.choose_drafted(&logits, Some(1)).unwrap(), (1, true));
    assert_eq!(s.choose_drafted(&logits, Some(2)).unwrap(), (1, false));
    assert_eq!(s.choose_drafted(&logits, None).unwrap(), (1, false));
}
