//! The OpenAI request JSON (`pocketrt::api`): input = a request's JSON, NUL, a reply's
//! text. The JSON is parsed as a chat-completions and as a completions request; one that
//! parses is checked and prepared (ranges, `response_format` / `grammar` compiled by
//! llguidance with its first mask, tools, the messages rendered in the Qwen3 template and
//! fitted to the context); a run that starts takes the reply's tokens through its output
//! filters (stop strings, thinking, tool calls) and finishes. Errors are answers; a
//! panic, hang or unbounded memory is a finding.

use super::split_nul;
use pocketrt::api::{ChatCompletionRequest, ChatRun, CompletionRequest, CompletionRun, Run};
use pocketrt::generate::{FinishReason, GenerateStats};
use pocketrt::tokenizer::{byte_level_json, ChatTemplate, StreamDecoder, Tokenizer};
use std::sync::OnceLock;

const CONTEXT: usize = 512;
/// Reply tokens a run takes at most (the reply is bytes: one token each).
const REPLY_TOKENS: usize = 256;
const TEMPLATE: &str = include_str!("../../tests/fixtures/tokenizer/qwen3_chat_template.jinja");

fn model() -> &'static (Tokenizer, ChatTemplate) {
    static MODEL: OnceLock<(Tokenizer, ChatTemplate)> = OnceLock::new();
    MODEL.get_or_init(|| {
        let specials = [
            "<|im_start|>",
            "<|im_end|>",
            "<|endoftext|>",
            "<think>",
            "</think>",
        ];
        let mut tok = Tokenizer::from_hf_json(&byte_level_json(&specials)).unwrap();
        tok.set_eos_ids(vec![256 + 1]).unwrap();
        (tok, ChatTemplate::new(TEMPLATE).unwrap())
    })
}

/// Take `reply` through `run` token by token, as a driver would, and finish it.
fn drive<R: Run>(mut run: R, tok: &Tokenizer, reply: &str)
where
    R::Chunk: serde::Serialize,
    R::Response: serde::Serialize,
{
    let _ = run.first_chunk();
    let mut decoder = StreamDecoder::new(true);
    let ids = tok.encode(reply, true);
    let mut generated = 0;
    for &id in ids.iter().take(REPLY_TOKENS.min(run.options().max_tokens)) {
        let Ok(text) = decoder.push(tok, id) else {
            return;
        };
        generated += 1;
        let _ = run.push(tok, &text, None);
        if run.should_stop() {
            break;
        }
    }
    let stats = GenerateStats {
        prompt_tokens: run.prompt().len(),
        reused_tokens: 0,
        prompt_seconds: 0.0,
        generated_tokens: generated,
        generate_seconds: 0.0,
        finish: FinishReason::MaxTokens,
        context_shifts: 0,
        speculation: Default::default(),
    };
    let (chunks, response) = run.finish(&stats);
    // What a server sends: every chunk and the response serialize.
    for c in &chunks {
        serde_json::to_string(c).expect("a chunk serializes");
    }
    serde_json::to_string(&response).expect("a response serializes");
}

pub fn run(input: &[u8]) {
    let (json, reply) = split_nul(input);
    let Ok(json) = std::str::from_utf8(json) else {
        return;
    };
    let reply = String::from_utf8_lossy(reply);
    let (tok, template) = model();
    if let Ok(req) = ChatCompletionRequest::from_json(json) {
        if let Ok(run) = ChatRun::new(&req, tok, template, CONTEXT) {
            drive(run, tok, &reply);
        }
    }
    match CompletionRequest::from_json(json) {
        Ok(req) => {
            if let Ok(run) = CompletionRun::new(&req, tok, CONTEXT) {
                drive(run, tok, &reply);
            }
        }
        Err(e) => {
            // An error names its field in OpenAI's shape.
            serde_json::to_string(&e).expect("an error serializes");
        }
    }
}
