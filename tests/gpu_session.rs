//! The GPU engine's KV cache reused across requests, in every device profile forced on the
//! test adapter: a request that extends the cached tokens processes only the new ones
//! (batched prefill where the profile has it, then decode), one that diverges rewinds to
//! the common prefix and overwrites the rest; each continuation equals a fresh run of the
//! whole request on the CPU oracle (Q4 weights), greedy token for token.

mod gpu_common;

use gpu_common::{profiles, Rng};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::source::open;
use std::path::PathBuf;

const CONTEXT: usize = 128;
const NEW: usize = 6;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/llama")
}

/// The oracle's greedy continuation of the whole of `tokens`, from an empty cache.
fn fresh(tokens: &[u32]) -> Vec<u32> {
    let src = &mut *open(&fixture()).unwrap();
    let mut e = Engine::load(src, Backend::Reference, WeightMode::Q4, CONTEXT).unwrap();
    e.greedy(tokens, NEW, |_| true).unwrap()
}

#[test]
fn gpu_cache_reuse_and_rollback_continue_like_a_fresh_oracle_run() {
    let mut rng = Rng::new(3);
    let vocab = 512;
    let a: Vec<u32> = (0..40).map(|_| (rng.next_u64() % vocab) as u32).collect();
    for ctx in profiles() {
        let name = ctx.profile.name;
        let src = &mut *open(&fixture()).unwrap();
        let mut gpu = Engine::load_on_gpu(ctx.clone(), src, CONTEXT).unwrap();
        assert_eq!(gpu.config().vocab_size as u64, vocab);
        let first = gpu.greedy(&a, NEW, |_| true).unwrap();
        assert_eq!(first, fresh(&a), "{name}: first request");
        // The cache holds the prompt and the generated tokens that were fed back.
        assert_eq!(gpu.position(), a.len() + NEW - 1, "{name}");

        // Extend: only the tokens after the cached ones are processed.
        let mut b = a.clone();
        b.extend(&first[..NEW - 1]);
        b.extend([7, 11, 13]);
        let reused = gpu.position();
        let second = gpu.greedy(&b[reused..], NEW, |_| true).unwrap();
        assert_eq!(second, fresh(&b), "{name}: extended request");

        // Diverge after 20 tokens: rewind and overwrite the rest of the cache.
        let mut c = a[..20].to_vec();
        c.extend([3, 5, 8, 21, 34, 55, 89, 144]);
        gpu.rewind(20);
        let third = gpu.greedy(&c[20..], NEW, |_| true).unwrap();
        assert_eq!(third, fresh(&c), "{name}: diverging request");
        println!("{name}: {first:?} {second:?} {third:?}");
    }
}
