//! The real Qwen2.5-Coder-0.5B GGUF → Q4 g64 → GPU (lavapipe here): the greedy
//! continuation of `def fibonacci(n):` equals the CPU oracle's on the same Q4 g64 weights,
//! token for token, for 32 tokens — through the backend-neutral `Engine` on both sides.
//! A missing adapter fails this test (it never skips).

mod real_data;

use pocketrt::engine::Backend;
use real_data::greedy::{fibonacci_prompt, greedy, NEW_TOKENS};

#[test]
fn gpu_greedy_equals_the_oracle_on_real_q4_weights_for_32_tokens() {
    let (tok, prompt) = fibonacci_prompt();

    let cpu = greedy(Backend::Reference, &prompt);
    let gpu = greedy(Backend::Gpu, &prompt);
    let text = tok.decode(&gpu, true).unwrap();
    println!("{text}");
    assert_eq!(gpu, cpu, "GPU and oracle diverge:\n{text}");
    assert_eq!(gpu.len(), NEW_TOKENS);
    assert!(text.contains("if n") && text.contains("return"), "{text}");
}
