//! Sampling on the GPU engine equals sampling on the CPU oracle (same Q4 weights, same
//! seed): through the GPU top-k readback (top-k ≤ 64) and through the full-logits
//! readback (top-k 0), over 32 tokens. Logits differ by the f16 KV cache's rounding
//! (~1e-4), so a draw could only differ if it landed within that of a boundary.

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::source::open;
use pocketrt::sampler::{Sampler, SamplerConfig};
use std::path::PathBuf;

const CONTEXT: usize = 48;

fn sampled(backend: Backend, config: SamplerConfig) -> Vec<u32> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/qwen3");
    let mut engine =
        Engine::load(&mut *open(&dir).unwrap(), backend, WeightMode::Q4, CONTEXT).unwrap();
    let mut sampler = Sampler::new(config).unwrap();
    for t in [5, 9] {
        engine.feed(t).unwrap();
    }
    let mut token = 2;
    (0..32)
        .map(|_| {
            token = engine.step_sampled(token, &mut sampler).unwrap();
            token
        })
        .collect()
}

#[test]
fn gpu_sampling_draws_the_cpu_oracles_tokens() {
    for top_k in [40, 0] {
        let config = SamplerConfig {
            temperature: 0.9,
            top_k,
            top_p: 0.95,
            seed: 1234,
        };
        let cpu = sampled(Backend::Reference, config);
        let gpu = sampled(Backend::Gpu, config);
        assert_eq!(gpu, cpu, "top-k {top_k}");
        // Not greedy: the draws differ from the argmax sequence.
        assert_ne!(cpu, sampled(Backend::Reference, SamplerConfig::greedy()));
    }
}
