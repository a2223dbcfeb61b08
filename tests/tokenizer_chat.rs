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

/// A long agent conversation: `turns` rounds of user, assistant (reasoning + a tool call),
/// tool result and answer, with two tools, each message ~200 bytes.
fn long_agent_chat(turns: usize) -> (Vec<Message>, ChatOptions) {
    let text = "The quick brown fox jumps over the lazy dog; ".repeat(4);
    let mut messages = vec![Message::system("You are a helpful assistant.")];
    for i in 0..turns {
        messages.push(Message::user(format!("{i}: {text}")));
        messages.push(Message {
            reasoning_content: Some(text.clone()),
            tool_calls: Some(serde_json::json!([{"type": "function", "function":
                {"name": "get_weather", "arguments": {"city": format!("City {i}")}}}])),
            ..Message::assistant("")
        });
        messages.push(Message::tool(format!("{{\"temperature\": {i}}}")));
        messages.push(Message::assistant(text.clone()));
    }
    let tool = |name: &str| {
        serde_json::json!({"type": "function", "function": {"name": name,
            "description": "Looks something up", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
    };
    let opts = ChatOptions {
        add_generation_prompt: true,
        tools: Some(serde_json::json!([tool("get_weather"), tool("get_time")])),
        ..ChatOptions::default()
    };
    (messages, opts)
}

#[test]
fn qwen3_template_renders_a_thousand_message_agent_chat_within_its_bounds() {
    let t = ChatTemplate::new(TEMPLATE).unwrap();
    let (messages, opts) = long_agent_chat(250);
    assert_eq!(messages.len(), 1001);
    let s = t.render(&messages, &opts).unwrap();
    // A turn per message (each tool result opens a user turn), then the assistant's.
    assert_eq!(s.matches("<|im_start|>").count(), 1001 + 1);
    assert!(s.contains("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"City 249\"}}"));
}
