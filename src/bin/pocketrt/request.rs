//! `run` and `chat` speak to the model through the OpenAI protocol module (`pocketrt::api`),
//! like the npm package and a server: the command line's sampling flags become a
//! request's fields, and the reply's chunks are printed as they stream (the answer to
//! stdout, a `<think>` block's reasoning to stderr).

use pocketrt::api::{
    ApiError, ChatCompletionChunk, Completion, GrammarSpec, Params, ResponseFormat, Stop,
};
use pocketrt::Error;
use serde_json::{Map, Value as Json};
use std::io::Write;

/// How tokens are chosen (greedy for `run` unless a temperature is given).
#[derive(clap::Args)]
pub struct SamplingArgs {
    /// Sampling temperature (0–2); 0 is greedy.
    #[arg(long = "temp")]
    pub temperature: Option<f32>,
    /// Sample among the K most likely tokens (0: all).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Sample among the most likely tokens whose probability reaches P.
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Keep only tokens at least this likely relative to the best one (0: off).
    #[arg(long)]
    pub min_p: Option<f32>,
    /// Penalise recently generated tokens (llama.cpp's; 1: off, e.g. 1.1).
    #[arg(long)]
    pub repeat_penalty: Option<f32>,
    /// The tokens the penalty looks back on (0: off, -1: the whole context).
    #[arg(long, allow_negative_numbers = true)]
    pub repeat_last_n: Option<i64>,
    /// End the reply at this text (not printed); may be given several times.
    #[arg(long)]
    pub stop: Vec<String>,
    /// Random seed (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Let a model with a thinking switch (Qwen3) think first (default: its template's).
    #[arg(long, overrides_with = "no_think")]
    pub think: bool,
    /// Let it answer directly.
    #[arg(long, overrides_with = "think")]
    pub no_think: bool,
    /// The output must be JSON valid under the JSON Schema in FILE (`response_format`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["grammar", "regex"])]
    pub json_schema: Option<std::path::PathBuf>,
    /// The output must match the Lark grammar in FILE (llguidance's dialect).
    #[arg(long, value_name = "FILE", conflicts_with = "regex")]
    pub grammar: Option<std::path::PathBuf>,
    /// The output must match this regular expression (all of it).
    #[arg(long, value_name = "RE")]
    pub regex: Option<String>,
}

/// The text of `path`, for the flag `flag`.
fn read(flag: &str, path: &std::path::Path) -> Result<String, ApiError> {
    std::fs::read_to_string(path)
        .map_err(|e| ApiError::invalid(flag, format!("{flag} {}: {e}", path.display())))
}

/// The defaults a command puts where a flag is not given.
pub struct Defaults {
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
}

/// `run`: greedy.
pub const RUN: Defaults = Defaults {
    temperature: 0.0,
    top_k: 0,
    top_p: 1.0,
};

/// `chat`: the usual sampling for conversation.
pub const CHAT: Defaults = Defaults {
    temperature: 0.7,
    top_k: 40,
    top_p: 0.9,
};

impl SamplingArgs {
    /// The request fields for these flags and a reply of at most `max_tokens` (a schema
    /// or grammar file that cannot be read or parsed is an error naming the flag).
    pub fn params(&self, d: &Defaults, max_tokens: usize) -> Result<Params, ApiError> {
        let clock = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_nanos() as u64)
        };
        let seed = self.seed.unwrap_or_else(clock);
        let response_format = match &self.json_schema {
            Some(path) => {
                let schema: Json =
                    serde_json::from_str(&read("--json-schema", path)?).map_err(|e| {
                        ApiError::invalid(
                            "--json-schema",
                            format!("{}: not JSON: {e}", path.display()),
                        )
                    })?;
                let json_schema =
                    serde_json::json!({"name": "cli", "schema": schema, "strict": true});
                Some(ResponseFormat {
                    kind: "json_schema".into(),
                    json_schema: Some(json_schema),
                })
            }
            None => None,
        };
        let grammar = match (&self.grammar, &self.regex) {
            (Some(path), _) => Some(GrammarSpec {
                kind: "lark".into(),
                value: read("--grammar", path)?,
            }),
            (None, Some(re)) => Some(GrammarSpec {
                kind: "regex".into(),
                value: re.clone(),
            }),
            (None, None) => None,
        };
        Ok(Params {
            response_format,
            grammar,
            max_tokens: Some(max_tokens as i64),
            temperature: Some(f64::from(self.temperature.unwrap_or(d.temperature))),
            top_k: Some(self.top_k.unwrap_or(d.top_k) as i64),
            top_p: Some(f64::from(self.top_p.unwrap_or(d.top_p))),
            min_p: self.min_p.map(f64::from),
            repetition_penalty: self.repeat_penalty.map(f64::from),
            repeat_last_n: self.repeat_last_n,
            stop: (!self.stop.is_empty()).then(|| Stop::Many(self.stop.clone())),
            seed: Some(seed as i64),
            ..Params::default()
        })
    }

    /// `chat_template_kwargs` for `--think` / `--no-think`.
    pub fn template_kwargs(&self) -> Option<Map<String, Json>> {
        let think = match (self.think, self.no_think) {
            (true, _) => true,
            (_, true) => false,
            _ => return None,
        };
        Some(Map::from_iter([("enable_thinking".into(), think.into())]))
    }
}

/// Write a streamed piece now (stdout: the answer, stderr: reasoning). False when
/// stdout is gone.
pub fn emit(text: &str, reasoning: bool) -> bool {
    if reasoning {
        eprint!("{text}");
        return true;
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{text}").and_then(|_| out.flush()).is_ok()
}

/// Print a chat chunk's text.
pub fn print_chat(chunk: &ChatCompletionChunk) -> bool {
    chunk.choices.iter().all(|c| {
        emit(c.delta.reasoning_content.as_deref().unwrap_or(""), true)
            && emit(c.delta.content.as_deref().unwrap_or(""), false)
    })
}

/// Print a completion chunk's text.
pub fn print_completion(chunk: &Completion) -> bool {
    chunk.choices.iter().all(|c| emit(&c.text, false))
}

/// A request error as the command's error.
pub fn cli_error(e: ApiError) -> Error {
    match e.error.code.as_deref() {
        Some("context_length_exceeded") => {
            Error::InvalidArgument(format!("{} (see --context)", e.error.message))
        }
        _ => Error::InvalidArgument(e.to_string()),
    }
}
