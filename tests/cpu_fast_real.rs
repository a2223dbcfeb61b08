//! The real Qwen2.5-Coder-0.5B GGUF → Q4 g64 → the fast CPU backend: the greedy
//! continuation of `def fibonacci(n):` equals the reference backend's (the oracle) on the
//! same Q4 g64 weights, token for token, for 32 tokens — through `Engine` on both sides.

mod real_data;

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format;
use pocketrt::tokenizer::Tokenizer;
use real_data::coder_gguf;

const NEW_TOKENS: usize = 32;

fn greedy(backend: Backend, prompt: &[u32]) -> Vec<u32> {
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

#[test]
fn fast_cpu_greedy_equals_the_oracle_on_real_q4_weights_for_32_tokens() {
    let mut src = format::open(&coder_gguf()).unwrap();
    let tok = Tokenizer::from_hf_json(&src.tokenizer_json().unwrap().unwrap()).unwrap();
    let prompt = tok.encode("def fibonacci(n):", false);
    assert_eq!(
        prompt,
        [750, 75698, 1445, 1648],
        "llama.cpp's ids for the prompt"
    );
    drop(src);

    let reference = greedy(Backend::Reference, &prompt);
    let fast = greedy(Backend::Cpu, &prompt);
    let text = tok.decode(&fast, true).unwrap();
    println!("{text}");
    assert_eq!(
        fast, reference,
        "fast CPU backend and oracle diverge:\n{text}"
    );
    assert_eq!(fast.len(), NEW_TOKENS);
    assert!(text.contains("if n") && text.contains("return"), "{text}");
}
