//! The requests of OpenAI's `/v1/chat/completions` and `/v1/completions`, as serde types
//! with the fields OpenAI documents and the extensions local runtimes share (`top_k`,
//! `min_p`, `repetition_penalty`, `repeat_last_n`, `chat_template_kwargs`) plus ours
//! (`context_overflow`, `grammar`, `speculative`). Every field is optional, unknown fields are ignored (as OpenAI
//! does), and values are checked later (`validate.rs`), so that an error can name its field.

use serde::Deserialize;
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

/// A `/v1/chat/completions` request.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ChatCompletionRequest {
    /// Echoed in the response; the loaded model answers whatever it names.
    pub model: Option<String>,
    /// The whole conversation (requests are stateless; the KV cache makes the repeated
    /// history cheap).
    pub messages: Vec<ChatMessage>,
    /// OpenAI's newer name of `max_tokens` (either may be given).
    pub max_completion_tokens: Option<i64>,
    /// Return log-probabilities of the chosen tokens.
    pub logprobs: Option<bool>,
    pub tools: Option<Vec<Json>>,
    pub tool_choice: Option<ToolChoice>,
    /// Template variables, e.g. `{"enable_thinking": false}` for Qwen3.
    pub chat_template_kwargs: Option<Map<String, Json>>,
    #[serde(flatten)]
    pub params: Params,
}

/// A `/v1/completions` request: plain text continued.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: Option<Prompt>,
    /// Log-probabilities of the chosen token and this many alternatives (0–20).
    pub logprobs: Option<i64>,
    /// Prepend the prompt to the returned text.
    pub echo: Option<bool>,
    /// Text after the completion: not supported.
    pub suffix: Option<String>,
    #[serde(flatten)]
    pub params: Params,
}

/// The fields both requests share: streaming, the reply's length, sampling, stopping.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Params {
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<i64>,
    pub stop: Option<Stop>,
    /// Choices per request: only 1.
    pub n: Option<i64>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    /// Token id (as a string) → bias added to its logit, in [-100, 100].
    pub logit_bias: Option<BTreeMap<String, f64>>,
    /// Alternatives per token with `logprobs` (0–20).
    pub top_logprobs: Option<i64>,
    // Extensions (llama.cpp, vLLM, WebLLM):
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub repetition_penalty: Option<f64>,
    /// The window of the penalties (tokens; -1 or absent: the default).
    pub repeat_last_n: Option<i64>,
    /// `"error"` (default) or `"truncate"`: drop the oldest turns until the prompt fits.
    pub context_overflow: Option<ContextPolicy>,
    /// `{"type": "text" | "json_object"}` or `{"type": "json_schema", "json_schema":
    /// {"name", "schema", "strict"}}`: the output must be JSON (valid under the schema).
    pub response_format: Option<ResponseFormat>,
    /// pocketrt's extension: `{"type": "lark" | "regex", "value": "..."}`, the output must
    /// match the grammar (llguidance's Lark dialect) or the regular expression.
    pub grammar: Option<GrammarSpec>,
    /// pocketrt's extension: speculative decoding for this request (`speculative.rs`):
    /// `false` off, `true` on (the front end's drafts, or lookup where it has none),
    /// `{"n_max": N}` on with at most N drafts per step. Absent: the front end's default.
    pub speculative: Option<Speculative>,
}

/// `speculative`: a switch, or on with options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Speculative {
    Switch(bool),
    Options(SpeculativeOptions),
}

/// `speculative: {"n_max": N}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpeculativeOptions {
    /// Most drafts per step, 1 to [`crate::speculate::DRAFT_MAX_LIMIT`] (absent: the
    /// default's).
    pub n_max: Option<i64>,
}

/// `grammar`: a Lark grammar or a regular expression.
#[derive(Clone, Debug, Deserialize)]
pub struct GrammarSpec {
    #[serde(rename = "type")]
    pub kind: String,
    pub value: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamOptions {
    /// A last chunk with `usage` and no choices.
    pub include_usage: Option<bool>,
}

/// `stop`: one string or a list.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

impl Stop {
    /// The non-empty stop strings.
    pub fn strings(&self) -> Vec<String> {
        let all = match self {
            Stop::One(s) => std::slice::from_ref(s),
            Stop::Many(v) => v.as_slice(),
        };
        all.iter().filter(|s| !s.is_empty()).cloned().collect()
    }
}

/// A completions `prompt`: text, a list of one text, or token ids.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextPolicy {
    #[default]
    Error,
    Truncate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    /// OpenAI's newer name for system instructions (rendered as `system`).
    Developer,
    User,
    Assistant,
    Tool,
}

impl Role {
    /// The role the chat template sees.
    pub fn template_name(self) -> &'static str {
        match self {
            Role::System | Role::Developer => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of the conversation.
#[derive(Clone, Debug, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    /// Absent or null only on an assistant message with `tool_calls`.
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub name: Option<String>,
    /// The calls an assistant message made (to be answered by `tool` messages).
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallIn>>,
    /// The call a `tool` message answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// An assistant's earlier reasoning, where a client sends it back.
    #[serde(default)]
    pub reasoning_content: Option<String>,
}

impl ChatMessage {
    /// A message of `role` with text `content`.
    pub fn new(role: Role, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: Some(Content::Text(content.into())),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            reasoning_content: None,
        }
    }
}

/// Message content: a string or a list of parts (only `text` parts).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Clone, Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// A tool call in an assistant message of the request.
#[derive(Clone, Debug, Deserialize)]
pub struct ToolCallIn {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    pub function: FunctionCallIn,
}

#[derive(Clone, Debug, Deserialize)]
pub struct FunctionCallIn {
    pub name: String,
    /// A JSON string as OpenAI sends it (an object is accepted too).
    pub arguments: Json,
}

/// `tool_choice`: `"none"`, `"auto"`, `"required"`, or one named function.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(String),
    Function { function: FunctionName },
}

#[derive(Clone, Debug, Deserialize)]
pub struct FunctionName {
    pub name: String,
}

/// `response_format`: `{"type": "text" | "json_object" | "json_schema", "json_schema"}`.
#[derive(Clone, Debug, Deserialize)]
pub struct ResponseFormat {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub json_schema: Option<Json>,
}
