//! Sampling on the GPU engine, in every device profile forced on the test adapter,
//! against sampling on the CPU oracle (same Q4 weights, same seed), through the GPU top-k
//! readback (top-k ≤ 64) and the full-logits readback (top-k 0). Both engines see the same tokens (the oracle's draws) for 64 steps and draw
//! with generators in lockstep. Logits differ by the f16 KV cache's rounding (~1e-4), so
//! a draw can differ only when it lands that close to a boundary between two tokens — on
//! this tiny random model's flat distributions, rarely; a wrong candidate list, order,
//! logit or temperature would change most draws.

mod gpu_common;

use gpu_common::profiles;
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::source::open;
use pocketrt::gpu::GpuContext;
use pocketrt::sampler::{Sampler, SamplerConfig};
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

fn on_gpu(ctx: &Arc<GpuContext>) -> Engine {
    Engine::load_on_gpu(ctx.clone(), &mut *open(&fixture()).unwrap(), STEPS + 4).unwrap()
}

/// (oracle draws, GPU draws) with both fed the oracle's tokens.
fn lockstep(ctx: &Arc<GpuContext>, config: SamplerConfig) -> (Vec<u32>, Vec<u32>) {
    let (mut cpu, mut gpu) = (oracle(), on_gpu(ctx));
    let (mut s_cpu, mut s_gpu) = (
        Sampler::new(config.clone()).unwrap(),
        Sampler::new(config).unwrap(),
    );
    for t in [5, 9] {
        cpu.feed(t).unwrap();
        gpu.feed(t).unwrap();
    }
    let mut token = 2;
    let (mut a, mut b) = (vec![], vec![]);
    for _ in 0..STEPS {
        let want = cpu.step_sampled(token, &mut s_cpu).unwrap();
        b.push(gpu.step_sampled(token, &mut s_gpu).unwrap());
        a.push(want);
        token = want;
    }
    (a, b)
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
        let (cpu, gpu) = lockstep(ctx, config);
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
