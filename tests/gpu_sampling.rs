//! Sampling on the GPU engine, in every device profile forced on the test adapter,
//! against sampling on the CPU oracle (same Q4 weights, same seed), through the GPU top-k
//! readback (top-k ≤ 64) and the full-logits readback (top-k 0), plain and with the
//! sampler's penalties, logit bias, min-p and logprobs (adjusted on the GPU before its
//! top-k, the normaliser read back with it). Both engines see the same tokens (the
//! oracle's draws) and draw with generators in lockstep. Logits differ by the f16 KV
//! cache's rounding (~1e-4), so a draw can differ only when it lands that close to a
//! boundary between two tokens — on this tiny random model's flat distributions, rarely;
//! a wrong candidate list, order, logit, adjustment or temperature would change most draws.

mod gpu_common;

use gpu_common::profiles;
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::open;
use pocketrt::gpu::ProfiledContext;
use pocketrt::sampler::{Sampler, SamplerConfig, TokenLogprobs};
use std::path::PathBuf;
use std::sync::Arc;

const STEPS: usize = 64;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/qwen3")
}

fn oracle() -> Engine {
    let src = &mut *open(&fixture()).unwrap();
    Engine::load(src, Backend::Reference, WeightMode::Q4, STEPS + 4).unwrap()
}

fn on_gpu(ctx: &Arc<ProfiledContext>) -> Engine {
    Engine::load_on_gpu(ctx.clone(), &mut *open(&fixture()).unwrap(), STEPS + 4).unwrap()
}

/// One choice: the token and, when asked for, its log-probabilities.
type Choice = (u32, Option<TokenLogprobs>);

/// (oracle choices, GPU choices) over `steps`, with both engines fed the oracle's tokens
/// and both samplers observing that sequence (prompt included), as a session does.
fn lockstep(ctx: &Arc<ProfiledContext>, config: SamplerConfig, steps: usize) -> [Vec<Choice>; 2] {
    let (mut cpu, mut gpu) = (oracle(), on_gpu(ctx));
    let (mut s_cpu, mut s_gpu) = (
        Sampler::new(config.clone()).unwrap(),
        Sampler::new(config).unwrap(),
    );
    let prompt = [5, 9, 2];
    for t in &prompt[..2] {
        cpu.feed(*t).unwrap();
        gpu.feed(*t).unwrap();
    }
    s_cpu.observe(&prompt);
    s_gpu.observe(&prompt);
    let mut token = prompt[2];
    let (mut a, mut b) = (vec![], vec![]);
    for _ in 0..steps {
        let want = cpu.step_sampled(token, &mut s_cpu).unwrap();
        let got = gpu.step_sampled(token, &mut s_gpu).unwrap();
        a.push((want, s_cpu.take_logprobs()));
        b.push((got, s_gpu.take_logprobs()));
        s_cpu.observe(&[want]);
        s_gpu.observe(&[want]);
        token = want;
    }
    [a, b]
}

/// The tokens of choices.
fn tokens(choices: &[Choice]) -> Vec<u32> {
    choices.iter().map(|c| c.0).collect()
}

#[test]
fn gpu_sampling_draws_the_cpu_oracles_tokens() {
    // Allowed differing draws: top-k 40 spreads the mass over 40 tokens (p ≈ 0.025 each,
    // far wider than the logit error); top-k 0 over all 512 of this random model's nearly
    // equal logits (p ≈ 0.002 each, about 3× the probability error of a 5e-4 logit
    // error at T = 0.9), so a few draws there flip. A plumbing bug (wrong buffer, order
    // or temperature) agrees by chance only (~1/40 or ~1/512 per draw).
    let cases = [(40, 0.95, 2), (0, 1.0, STEPS / 8)];
    for (ctx, (top_k, top_p, allowed)) in profiles().iter().flat_map(|c| cases.map(|k| (c, k))) {
        let profile = ctx.profile.name;
        let config = SamplerConfig {
            temperature: 0.9,
            top_k,
            top_p,
            seed: 1234,
            ..SamplerConfig::greedy()
        };
        let [cpu, gpu] = lockstep(ctx, config, STEPS);
        let (cpu, gpu) = (tokens(&cpu), tokens(&gpu));
        let differ = cpu.iter().zip(&gpu).filter(|(a, b)| a != b).count();
        println!("{profile} top-k {top_k}: {differ} of {STEPS} draws differ");
        assert!(
            differ <= allowed,
            "{profile} top-k {top_k}: {differ} draws differ\n{cpu:?}\n{gpu:?}"
        );
        // Not greedy: the draws are spread over many tokens.
        let mut distinct = cpu.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > STEPS / 2, "{cpu:?}");
    }
}

/// Sampled decoding pipelined on the GPU (drawn there from its top-k with the seeded
/// generator's numbers, `Engine::sampled_from`, as sessions decode) against the oracle
/// with the same seed: the oracle, fed the GPU's tokens, draws the same ones within the
/// step-by-step test's allowance.
#[test]
fn pipelined_gpu_sampling_draws_the_cpu_oracles_tokens() {
    let config = SamplerConfig {
        temperature: 0.9,
        top_k: 40,
        top_p: 0.95,
        seed: 1234,
        ..SamplerConfig::greedy()
    };
    for ctx in profiles() {
        let profile = ctx.profile.name;
        let prompt = [5, 9, 2];
        let mut gpu = on_gpu(ctx);
        gpu.feed_all(&prompt[..2]).unwrap();
        let mut s_gpu = Sampler::new(config.clone()).unwrap();
        s_gpu.observe(&prompt);
        let mut draws = gpu
            .gpu_draws(&s_gpu)
            .expect("plain top-k sampling draws on the GPU");
        let mut got = vec![];
        gpu.sampled_from(prompt[2], &mut draws, |t, _| {
            got.push(t);
            Ok(got.len() < STEPS)
        })
        .unwrap();
        let mut cpu = oracle();
        cpu.feed_all(&prompt[..2]).unwrap();
        let mut s_cpu = Sampler::new(config.clone()).unwrap();
        s_cpu.observe(&prompt);
        let mut token = prompt[2];
        let mut want = vec![];
        for &g in &got {
            want.push(cpu.step_sampled(token, &mut s_cpu).unwrap());
            s_cpu.observe(&[g]);
            token = g;
        }
        let differ = want.iter().zip(&got).filter(|(a, b)| a != b).count();
        println!("{profile} pipelined: {differ} of {STEPS} draws differ");
        assert!(
            differ <= 2,
            "{profile}: {differ} draws differ\n{want:?}\n{got:?}"
        );
        let mut distinct = got.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > STEPS / 2, "{got:?}");
    }
}

/// Penalties over a 16-token window, a boost and a ban, and three alternatives' logprobs.
fn controls(temperature: f32, top_k: usize, min_p: f32) -> SamplerConfig {
    SamplerConfig {
        temperature,
        top_k,
        top_p: 0.95,
        min_p,
        repetition_penalty: 1.3,
        frequency_penalty: 0.4,
        presence_penalty: 0.3,
        penalty_last_n: 16,
        logit_bias: vec![(7, 0.5), (11, -100.0)],
        logprobs: Some(3),
        seed: 99,
    }
}

#[test]
fn gpu_penalties_bias_min_p_and_logprobs_match_the_cpu_oracle() {
    const STEPS: usize = 24;
    // Greedy (the adjusted argmax through the top-k readback, not pipelined), sampled
    // through the top-k readback with min-p, and sampled from the full raw logits (the
    // host adjusts those): (config, draws allowed to differ, as in the test above).
    let cases = [
        ("greedy", controls(0.0, 0, 0.0), 1),
        ("top-k 40, min-p", controls(0.9, 40, 0.5), 2),
        ("all logits", controls(0.9, 0, 0.0), STEPS / 8),
    ];
    for ctx in profiles() {
        let profile = ctx.profile.name;
        for (what, config, allowed) in cases.clone() {
            let [cpu, gpu] = lockstep(ctx, config, STEPS);
            let differ = tokens(&cpu)
                .iter()
                .zip(tokens(&gpu))
                .filter(|(a, b)| **a != *b)
                .count();
            println!("{profile} {what}: {differ} of {STEPS} choices differ");
            assert!(
                differ <= allowed,
                "{profile} {what}: {differ} differ\n{cpu:?}\n{gpu:?}"
            );
            // The ban holds; the window penalties keep greedy from a short loop.
            assert!(tokens(&cpu).iter().all(|&t| t != 11), "{cpu:?}");
            let mut distinct = tokens(&cpu);
            distinct.sort_unstable();
            distinct.dedup();
            assert!(distinct.len() > STEPS / 2, "{what}: {:?}", tokens(&cpu));
            // Logprobs: the same alternatives with the same values. The logits differ by
            // up to ~5e-4 (the f16 cache); a normaliser taken before the adjustments (the
            // penalties of 16 recent tokens move it by ~1.5e-2 on these flat logits) or
            // any other normaliser would not.
            let mut worst = 0f32;
            for ((t_cpu, a), (t_gpu, b)) in cpu.iter().zip(&gpu) {
                let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
                assert_eq!((a.token, b.token), (*t_cpu, *t_gpu));
                assert_eq!(a.top.len(), 3);
                if t_cpu == t_gpu {
                    worst = worst.max((a.logprob - b.logprob).abs());
                }
                for (x, y) in a.top.iter().zip(&b.top).filter(|(x, y)| x.0 == y.0) {
                    worst = worst.max((x.1 - y.1).abs());
                }
                // Log-probabilities of a distribution over the 512 tokens.
                assert!(
                    a.top[0].1 < 0.0 && a.top[0].1 > -(512f32.ln()) - 1.0,
                    "{a:?}"
                );
            }
            println!("{profile} {what}: logprobs differ by at most {worst:.2e}");
            assert!(
                worst < 1.5e-3,
                "{profile} {what}: logprobs differ by {worst}"
            );
        }
    }
}

#[test]
fn penalties_and_bias_change_the_oracles_greedy_tokens() {
    // The case above is only a check if the controls change what the model says.
    let run = |config: SamplerConfig| {
        let mut e = oracle();
        let mut s = Sampler::new(config).unwrap();
        let mut token = 2;
        (0..32)
            .map(|_| {
                token = e.step_sampled(token, &mut s).unwrap();
                s.observe(&[token]);
                token
            })
            .collect::<Vec<_>>()
    };
    assert_ne!(run(SamplerConfig::greedy()), run(controls(0.0, 0, 0.0)));
}
