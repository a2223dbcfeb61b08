//! The prompts of tests/fixtures/speculative/prompts.json: user messages for the chat
//! template, each named by its bench workload (code_edit, rag, chat). Shared by
//! tests/speculative.rs and benches/speculative.rs.

#[derive(serde::Deserialize)]
pub struct Prompt {
    pub workload: String,
    pub text: String,
}

#[derive(serde::Deserialize)]
struct Prompts {
    prompts: Vec<Prompt>,
}

/// Every prompt, in the file's order.
pub fn prompts() -> Vec<Prompt> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/speculative/prompts.json"
    );
    let text = std::fs::read_to_string(path).expect("tests/fixtures/speculative/prompts.json");
    let p: Prompts = serde_json::from_str(&text).expect("prompts.json");
    p.prompts
}
