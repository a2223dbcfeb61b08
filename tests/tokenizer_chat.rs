//! The real Qwen3 chat template rendered like HF transformers' `apply_chat_template`.
//! Fixtures: tests/fixtures/tokenizer/qwen3_chat_expected.json, made by
//! tests/fixtures/tokenizer/make_chat_fixtures.py (transformers + jinja2, no torch).

use pocketrt::tokenizer::{ChatOptions, ChatTemplate, Message};
use pocketrt::Error;

const TEMPLATE: &str = include_str!("fixtures/tokenizer/qwen3_chat_template.jinja");
const EXPECTED: &str = include_str!("fixtures/tokenizer/qwen3_chat_expected.json");

#[test]
fn qwen3_template_matches_transformers_apply_chat_template() {
    let t = ChatTemplate::new(TEMPLATE).expect("compile the Qwen3 template");
    let doc: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 5, "need at least 5 conversations");
    let (mut with_thinking_flag, mut with_tools) = (0, 0);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
        let opts = ChatOptions {
            add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
            enable_thinking: case.get("enable_thinking").and_then(|v| v.as_bool()),
            tools: case.get("tools").cloned(),
            ..ChatOptions::default()
        };
        with_thinking_flag += opts.enable_thinking.is_some() as usize;
        with_tools += opts.tools.is_some() as usize;
        let got = t
            .render(&messages, &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = case["expected"].as_str().unwrap();
        assert!(
            got == want,
            "{name}: differs from transformers\n--- ours\n{got}\n--- transformers\n{want}"
        );
    }
    assert!(with_thinking_flag >= 2 && with_tools >= 1);
}

#[test]
fn qwen3_thinking_off_adds_the_empty_think_block() {
    let t = ChatTemplate::new(TEMPLATE).unwrap();
    let opts = ChatOptions {
        add_generation_prompt: true,
        enable_thinking: Some(false),
        ..ChatOptions::default()
    };
    let s = t.render(&[Message::user("hi")], &opts).unwrap();
    assert_eq!(
        s,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    );
}

#[test]
fn template_using_an_unknown_function_is_a_chat_template_error() {
    let t = ChatTemplate::new("{{ strftime_later('%Y') }}").unwrap();
    let e = t.render(&[], &ChatOptions::default()).unwrap_err();
    assert!(
        matches!(&e, Error::ChatTemplate(m) if m.contains("strftime_later")),
        "{e}"
    );
}
