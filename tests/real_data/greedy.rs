//! Greedy continuations of `def fibonacci(n):` on the real coder GGUF (Q4 g64 weights),
//! through the backend-neutral `Engine`: what the real-model backend tests compare.
#![allow(dead_code)]

use super::coder_gguf;
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format;
use pocketrt::tokenizer::Tokenizer;

/// Tokens each continuation generates.
pub const NEW_TOKENS: usize = 32;

/// The coder's tokenizer and the prompt's ids (checked against llama.cpp's).
pub fn fibonacci_prompt() -> (Tokenizer, Vec<u32>) {
    let mut src = format::open(&coder_gguf()).unwrap();
    let tok = Tokenizer::from_hf_json(&src.tokenizer_json().unwrap().unwrap()).unwrap();
    let prompt = tok.encode("def fibonacci(n):", false);
    assert_eq!(
        prompt,
        [750, 75698, 1445, 1648],
        "llama.cpp's ids for the prompt"
    );
    (tok, prompt)
}

/// The greedy continuation of `prompt` on `backend` ([`NEW_TOKENS`] tokens), printing the
/// engine and its speed.
pub fn greedy(backend: Backend, prompt: &[u32]) -> Vec<u32> {
    let mut src = format::open(&coder_gguf()).unwrap();
    let context = prompt.len() + NEW_TOKENS;
    let mut engine = Engine::load(src.as_mut(), backend, WeightMode::Q4, context)
        .unwrap_or_else(|e| panic!("{backend:?}: {e}"));
    println!("{backend:?}: {}", engine.description());
    let t = std::time::Instant::now();
    let out = engine.greedy(prompt, NEW_TOKENS, |_| true).unwrap();
    println!(
        "{backend:?}: {:.2} tok/s",
        (prompt.len() + NEW_TOKENS) as f64 / t.elapsed().as_secs_f64()
    );
    out
}
