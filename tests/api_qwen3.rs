//! The OpenAI protocol with the real Qwen3 tokenizer and chat template: tool-calling
//! requests render exactly like HF transformers' `apply_chat_template(messages,
//! tools=...)` (fixture: tests/fixtures/api/qwen3_tools_expected.json, made by
//! make_qwen3_tools.py next to it), and canned Qwen3 replies — a `<tool_call>` block, a
//! `<think>` block — streamed token by token through `ChatRun` give the right
//! `tool_calls`, `reasoning_content` and `content`, in the stream and in the response.
//!
//! Data: the Qwen3 tokenizer cached by tests/fixtures/tokenizer/fetch-qwen3-tokenizer
//! (POCKETRT_QWEN3_DIR); missing data is a failure, not a skip.

use pocketrt::api::{
    ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChatRun, FinishReason, Run,
};
use pocketrt::generate::{self, GenerateStats};
use pocketrt::tokenizer::{ChatTemplate, StreamDecoder, Tokenizer};
use serde_json::{json, Value as Json};
use std::path::PathBuf;

const TEMPLATE: &str = include_str!("fixtures/tokenizer/qwen3_chat_template.jinja");
const EXPECTED: &str = include_str!("fixtures/api/qwen3_tools_expected.json");
const CONTEXT: usize = 40_960;

fn tokenizer() -> Tokenizer {
    let dir = std::env::var("POCKETRT_QWEN3_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            let home = std::env::var("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/pocketrt/qwen3-tokenizer")
        });
    let path = dir.join("tokenizer.json");
    let json = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\nrun tests/fixtures/tokenizer/fetch-qwen3-tokenizer (or set POCKETRT_QWEN3_DIR)",
            path.display()
        )
    });
    let mut tok = Tokenizer::from_hf_json(&json).unwrap();
    let im_end = tok.token_to_id("<|im_end|>").unwrap();
    tok.set_eos_ids(vec![im_end]).unwrap();
    tok
}

#[test]
fn tool_requests_render_like_transformers_apply_chat_template() {
    let tok = tokenizer();
    let template = ChatTemplate::new(TEMPLATE).unwrap();
    let doc: Json = serde_json::from_str(EXPECTED).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 3);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let req = ChatCompletionRequest::from_value(case["request"].clone()).unwrap();
        let run =
            ChatRun::new(&req, &tok, &template, CONTEXT).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = case["expected"].as_str().unwrap();
        let got = tok.decode(run.prompt(), false).unwrap();
        assert!(
            run.prompt() == tok.encode(want, true).as_slice(),
            "{name}: differs from transformers\n--- ours\n{got}\n--- transformers\n{want}"
        );
    }
}

/// Stream `reply` (encoded with the real tokenizer) token by token through a run of
/// `request`, as a driver would; the chunks and the response.
fn stream(request: Json, reply: &str) -> (Vec<ChatCompletionChunk>, ChatCompletion) {
    let tok = tokenizer();
    let template = ChatTemplate::new(TEMPLATE).unwrap();
    let req = ChatCompletionRequest::from_value(request).unwrap();
    let mut run = ChatRun::new(&req, &tok, &template, CONTEXT).unwrap();
    let mut chunks: Vec<ChatCompletionChunk> = run.first_chunk().into_iter().collect();
    let ids = tok.encode(reply, false);
    let mut decoder = StreamDecoder::new(true);
    for &id in &ids {
        let text = decoder.push(&tok, id).unwrap();
        chunks.extend(run.push(&tok, &text, None));
        assert!(!run.should_stop());
    }
    let stats = GenerateStats {
        prompt_tokens: run.prompt().len(),
        reused_tokens: 0,
        prompt_seconds: 0.0,
        generated_tokens: ids.len(),
        generate_seconds: 0.0,
        finish: generate::FinishReason::Eos,
        context_shifts: 0,
        speculation: Default::default(),
    };
    let (last, response) = run.finish(&stats);
    chunks.extend(last);
    (chunks, response)
}

fn weather_request() -> Json {
    let doc: Json = serde_json::from_str(EXPECTED).unwrap();
    doc["cases"][0]["request"].clone()
}

#[test]
fn a_canned_qwen3_tool_call_reply_parses_to_tool_calls_streamed_as_openai_does() {
    let reply = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"北京\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>";
    let (chunks, response) = stream(weather_request(), reply);
    let choice = &response.choices[0];
    assert_eq!(choice.finish_reason, FinishReason::ToolCalls);
    assert_eq!(choice.message.content, None);
    let calls = choice.message.tool_calls.as_ref().expect("tool_calls");
    let got: Vec<(String, Json)> = calls
        .iter()
        .map(|c| {
            (
                c.function.name.clone(),
                serde_json::from_str(&c.function.arguments).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "get_weather".to_string(),
                json!({"city": "北京", "unit": "celsius"})
            ),
            ("add".to_string(), json!({"a": 2, "b": 3}))
        ]
    );
    assert!(calls
        .iter()
        .all(|c| c.id.starts_with("call_") && c.kind == "function"));
    assert_ne!(calls[0].id, calls[1].id);
    // The stream: per call a first delta with id, type and name, then argument fragments
    // that add up to the arguments; no content.
    let deltas: Vec<_> = chunks
        .iter()
        .flat_map(|c| &c.choices)
        .flat_map(|c| c.delta.tool_calls.clone().unwrap_or_default())
        .collect();
    for (i, call) in calls.iter().enumerate() {
        let mine: Vec<_> = deltas.iter().filter(|d| d.index as usize == i).collect();
        assert_eq!(mine[0].id.as_deref(), Some(call.id.as_str()));
        assert_eq!(
            mine[0].function.name.as_deref(),
            Some(call.function.name.as_str())
        );
        assert!(mine[1..]
            .iter()
            .all(|d| d.id.is_none() && d.function.name.is_none()));
        let args: String = mine
            .iter()
            .filter_map(|d| d.function.arguments.as_deref())
            .collect();
        assert_eq!(args, call.function.arguments);
        assert!(mine.len() > 2, "arguments streamed in fragments: {mine:?}");
    }
    assert!(chunks.iter().flat_map(|c| &c.choices).all(|c| c
        .delta
        .content
        .as_deref()
        .unwrap_or("")
        .is_empty()));
    assert_eq!(
        chunks.last().unwrap().choices[0].finish_reason,
        Some(FinishReason::ToolCalls)
    );
}

#[test]
fn a_canned_qwen3_thinking_reply_splits_into_reasoning_and_content() {
    let request = json!({
        "messages": [{"role": "user", "content": "Name a color."}],
        "chat_template_kwargs": {"enable_thinking": true}
    });
    let (chunks, response) = stream(
        request,
        "<think>\nThe user wants a color.\n</think>\n\nBlue.",
    );
    let m = &response.choices[0].message;
    assert_eq!(
        m.reasoning_content.as_deref(),
        Some("The user wants a color.")
    );
    assert_eq!(m.content.as_deref(), Some("Blue."));
    assert_eq!(response.choices[0].finish_reason, FinishReason::Stop);
    // Streamed as separate delta fields, never mixed.
    let (mut reasoning, mut content) = (String::new(), String::new());
    for c in chunks.iter().flat_map(|c| &c.choices) {
        reasoning.push_str(c.delta.reasoning_content.as_deref().unwrap_or(""));
        content.push_str(c.delta.content.as_deref().unwrap_or(""));
        assert!(
            c.delta.reasoning_content.is_none()
                || c.delta.content.as_deref().unwrap_or("").is_empty()
        );
    }
    assert_eq!(
        (reasoning.trim_end(), content.as_str()),
        ("The user wants a color.", "Blue.")
    );
}
