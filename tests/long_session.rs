//! 10,000 generated tokens in one session on a 64-position context: the sliding window
//! (`ContextOverflow::SlidingWindow`) shifts the context ~300 times, and memory stays
//! flat after a warm-up of 1,000 tokens, measured every 1,000 tokens: the process's
//! resident memory on both backends, and on the GPU the bytes of every buffer the device
//! has created (a cumulative count: one buffer created per step or per shift would
//! show).
//!
//! The tolerance on resident memory is 1 MiB over the last 9,000 tokens: the reply's own
//! text (≤ 4 bytes a token, 36 KB) and allocator noise fit in it; a leak of 120 bytes a
//! token (a KV row of this model is 1 KiB) does not. `cargo test --test long_session --
//! --nocapture` prints the figures.

mod gpu_common;

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::generate::{ContextOverflow, FinishReason, GenerateOptions, Session};
use pocketrt::gpu::ProfiledContext;
use pocketrt::synth::SynthSource;
use pocketrt::tokenizer::{byte_level_json, Tokenizer};
use std::sync::Arc;

const TOKENS: usize = 10_000;
const EVERY: usize = 1_000;
const CONTEXT: usize = 64;
/// Resident memory may grow this much from the first sample to any later one.
const RSS_TOLERANCE: u64 = 1 << 20;

/// The tests measure one process's memory: they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The `tiny-qwen3` preset (2 layers, width 128) with random weights and no
/// end-of-sequence token (so greedy decoding never stops early), and a byte-level
/// tokenizer over its vocabulary.
fn model() -> (SynthSource, Tokenizer) {
    let mut config = pocketrt::synth::preset("tiny-qwen3").unwrap();
    config.eos_token_ids.clear();
    let specials: Vec<String> = (256..config.vocab_size)
        .map(|i| format!("<|s{i}|>"))
        .collect();
    let specials: Vec<&str> = specials.iter().map(String::as_str).collect();
    let tokenizer = Tokenizer::from_hf_json(&byte_level_json(&specials)).unwrap();
    (SynthSource::new(config, 23).unwrap(), tokenizer)
}

/// Resident memory of this process (VmRSS).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb << 10
}

/// Generate [`TOKENS`] in one request under a sliding window; every [`EVERY`] tokens,
/// (resident bytes, GPU buffer bytes created so far).
fn measure(mut session: Session, gpu: Option<Arc<ProfiledContext>>, name: &str) -> Vec<(u64, u64)> {
    let opts = GenerateOptions {
        max_tokens: TOKENS,
        overflow: ContextOverflow::SlidingWindow { keep: 8 },
        ..Default::default()
    };
    let prompt: Vec<u32> = b"A long story, told without end: once upon a time"
        .iter()
        .map(|&b| u32::from(b))
        .collect();
    let (mut n, mut samples) = (0, vec![]);
    let t0 = std::time::Instant::now();
    let (_, stats) = session
        .generate_tokens(&prompt, &opts, |_, _| {
            n += 1;
            if n % EVERY == 0 {
                let gpu_bytes = gpu.as_ref().map_or(0, |c| c.allocated_bytes());
                samples.push((rss(), gpu_bytes));
                println!(
                    "{name}: {n:>6} tokens: RSS {:.2} MiB, GPU buffers {} bytes, {:.1} s",
                    rss() as f64 / (1 << 20) as f64,
                    gpu_bytes,
                    t0.elapsed().as_secs_f64()
                );
            }
            true
        })
        .unwrap();
    assert_eq!(
        (stats.finish, stats.generated_tokens),
        (FinishReason::MaxTokens, TOKENS)
    );
    // (10,000 + 48 - 64) / 28 tokens between shifts: ~357 shifts.
    assert!(stats.context_shifts > 300, "{stats:?}");
    assert!(session.cached_tokens() <= CONTEXT);
    samples
}

fn assert_flat(samples: &[(u64, u64)], name: &str) {
    assert_eq!(samples.len(), TOKENS / EVERY, "{name}");
    let (rss0, gpu0) = samples[0];
    for (i, &(rss, gpu)) in samples.iter().enumerate().skip(1) {
        let tokens = (i + 1) * EVERY;
        assert!(
            rss <= rss0 + RSS_TOLERANCE,
            "{name}: resident memory grew {} KiB from 1,000 to {tokens} tokens",
            (rss - rss0) >> 10
        );
        assert_eq!(
            gpu, gpu0,
            "{name}: GPU buffers were created between 1,000 and {tokens} tokens"
        );
    }
}

#[test]
fn ten_thousand_tokens_on_the_cpu_backend_keep_memory_flat() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (mut src, tokenizer) = model();
    let engine = Engine::load(&mut src, Backend::Cpu, WeightMode::Q4, CONTEXT).unwrap();
    let samples = measure(Session::new(engine, tokenizer, None), None, "cpu");
    assert_flat(&samples, "cpu");
}

#[test]
fn ten_thousand_tokens_on_the_gpu_keep_gpu_and_host_memory_flat() {
    let (mut src, tokenizer) = model();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let ctx = gpu_common::gpu().clone();
    let engine = Engine::load_on_gpu(ctx.clone(), &mut src, CONTEXT).unwrap();
    let samples = measure(Session::new(engine, tokenizer, None), Some(ctx), "gpu");
    assert_flat(&samples, "gpu");
}
