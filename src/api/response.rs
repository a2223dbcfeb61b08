//! The responses of `/v1/chat/completions` and `/v1/completions` and their stream chunks,
//! shaped as OpenAI's (fields OpenAI's SDK types declare as required but nullable are
//! written as `null`, so the objects type-check as `ChatCompletion` / `ChatCompletionChunk`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a choice ended (`content_filter` never happens here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// End of sequence, a stop string, or the caller stopped.
    Stop,
    /// `max_tokens` or the context's end.
    Length,
    /// The reply is tool calls.
    ToolCalls,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
    pub prompt_tokens_details: PromptTokensDetails,
    /// pocketrt's extension, when the generation speculated: its drafts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpeculativeUsage>,
}

/// `usage.speculative`: what speculative decoding did ([`crate::speculate::SpecStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeculativeUsage {
    /// Tokens drafted and verified.
    pub drafted: usize,
    /// Of those, accepted (each a token generated without a step of its own).
    pub accepted: usize,
    /// Verification steps.
    pub steps: usize,
}

/// llama-server's `timings` object: in the response and in a stream's last chunk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Prompt tokens whose KV cache was reused.
    pub cache_n: usize,
    /// Prompt tokens processed.
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub prompt_per_token_ms: f64,
    pub prompt_per_second: f64,
    /// Tokens generated.
    pub predicted_n: usize,
    /// From the first generated token to the last.
    pub predicted_ms: f64,
    pub predicted_per_token_ms: f64,
    pub predicted_per_second: f64,
    /// Drafted tokens, when the generation speculated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_n: Option<usize>,
    /// Of those, accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_n_accepted: Option<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens whose KV cache was reused from an earlier request.
    pub cached_tokens: usize,
}

/// A `chat.completion`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    pub id: String,
    /// `"chat.completion"`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: Usage,
    /// llama-server's timings (a local runtime's extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub index: u32,
    pub message: AssistantMessage,
    pub logprobs: Option<ChoiceLogprobs>,
    pub finish_reason: FinishReason,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// `"assistant"`.
    pub role: String,
    /// `null` when the reply is only tool calls.
    pub content: Option<String>,
    /// The text of a `<think>` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Always `null` (OpenAI's SDK types require the field).
    #[serde(default)]
    pub refusal: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `call_…`.
    pub id: String,
    /// `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChoiceLogprobs {
    pub content: Vec<TokenLogprob>,
}

/// The log-probability of one chosen token and its most likely alternatives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f32,
    /// The token's UTF-8 bytes (a token may be part of a character).
    pub bytes: Option<Vec<u8>>,
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Option<Vec<u8>>,
}

/// A `chat.completion.chunk`: one step of a streamed reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    pub id: String,
    /// `"chat.completion.chunk"`.
    pub object: String,
    pub created: u64,
    pub model: String,
    /// Empty in the last chunk of `stream_options.include_usage`.
    pub choices: Vec<ChunkChoice>,
    /// Only in that last chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Only in the stream's last chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub logprobs: Option<ChoiceLogprobs>,
    pub finish_reason: Option<FinishReason>,
}

/// What a chunk adds to the message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A tool call as streamed: the first delta of a call has its `id`, `type` and name, the
/// following ones fragments of its arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub function: FunctionDelta,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// A `text_completion` (also each chunk of a streamed one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub id: String,
    /// `"text_completion"`.
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    /// In the response, and in a streamed reply's last chunk with `include_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// In the response and a streamed reply's last chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    pub index: u32,
    pub text: String,
    pub logprobs: Option<CompletionLogprobs>,
    pub finish_reason: Option<FinishReason>,
}

/// The completions API's older logprobs layout: parallel lists per token.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionLogprobs {
    pub tokens: Vec<String>,
    pub token_logprobs: Vec<f32>,
    pub top_logprobs: Vec<BTreeMap<String, f32>>,
    /// Byte offset of each token in the returned text.
    pub text_offset: Vec<usize>,
}
