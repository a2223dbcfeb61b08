//! The real Qwen2.5-Coder-0.5B GGUF → Q4 g64 → the fast CPU backend: the greedy
//! continuation of `def fibonacci(n):` equals the reference backend's (the oracle) on the
//! same Q4 g64 weights, token for token, for 32 tokens — through `Engine` on both sides.

mod real_data;

use pocketrt::engine::Backend;
use real_data::greedy::{fibonacci_prompt, greedy, NEW_TOKENS};

#[test]
fn fast_cpu_greedy_equals_the_oracle_on_real_q4_weights_for_32_tokens() {
    let (tok, prompt) = fibonacci_prompt();

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
