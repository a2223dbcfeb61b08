//! [`ChatRun`]: one chat-completions request from its prompt to its response, apart from
//! how the model steps. The driver (the native [`crate::generate::Session`], or the
//! browser's awaited steps) runs [`ChatRun::prompt`] with [`ChatRun::options`], hands
//! each generated token's text and log-probabilities to [`ChatRun::push`] (which returns
//! the chunk to stream, if any), stops when [`ChatRun::should_stop`] says so (a stop
//! string was generated) or its own generation ends, and calls [`ChatRun::finish`] with
//! the generation's stats for the last chunks and the whole response. No engine calls,
//! no blocking: wasm-compatible.

use super::context::fit_chat;
use super::error::ApiError;
use super::ids;
use super::messages::{chat_options, template_messages};
use super::output::{Event, Output};
use super::response::{
    AssistantMessage, ChatCompletion, ChatCompletionChunk, Choice, ChoiceLogprobs, ChunkChoice,
    Delta, FunctionDelta, TokenLogprob, ToolCallDelta,
};
use super::run::{Run, RunCore};
use super::types::ChatCompletionRequest;
use super::validate::{chat_logprobs, check};
use crate::generate::GenerateStats;
use crate::sampler::TokenLogprobs;
use crate::speculate::SpecOptions;
use crate::tokenizer::{ChatTemplate, Tokenizer};

/// One chat-completions request in progress.
#[derive(Clone, Debug)]
pub struct ChatRun {
    core: RunCore,
    content: String,
    reasoning: String,
    logprobs: Vec<TokenLogprob>,
    /// Messages dropped from the front by `context_overflow: "truncate"`.
    dropped: usize,
}

impl ChatRun {
    /// Check `req`, render its conversation in `template` and encode it for a model with
    /// `tokenizer` and `context` positions (applying the context policy).
    pub fn new(
        req: &ChatCompletionRequest,
        tokenizer: &Tokenizer,
        template: &ChatTemplate,
        context: usize,
    ) -> Result<ChatRun, ApiError> {
        let top = chat_logprobs(req.logprobs, req.params.top_logprobs)?;
        let max_tokens = match req.max_completion_tokens {
            Some(n) => ("max_completion_tokens", Some(n)),
            None => ("max_tokens", req.params.max_tokens),
        };
        let checked = check(
            &req.params,
            max_tokens,
            ("top_logprobs", top),
            tokenizer.vocab_size(),
            context,
        )?;
        let constraint = super::format::constraint(&req.params, tokenizer)?;
        let messages = template_messages(&req.messages)?;
        let opts = chat_options(req)?;
        let room = checked.max_tokens.unwrap_or(1);
        let fitted = fit_chat(&messages, room, context, checked.policy, |m| {
            let text = template.render(m, &opts)?;
            let tokens = tokenizer.encode(&text, true);
            Ok((text, tokens))
        })?;
        let output = Output::chat(
            checked.stops.clone(),
            &fitted.text,
            opts.tools.is_some(),
            ids::fresh_seed(),
        );
        let core = RunCore::new(
            "chatcmpl-",
            req.model.as_deref(),
            checked,
            fitted.tokens,
            context,
            output,
            constraint,
        );
        Ok(ChatRun {
            core,
            content: String::new(),
            reasoning: String::new(),
            logprobs: vec![],
            dropped: fitted.dropped,
        })
    }

    /// Messages dropped from the front to fit the context (`"truncate"`).
    pub fn dropped_messages(&self) -> usize {
        self.dropped
    }

    /// Resolve the request's `speculative` against the front end's `default`
    /// ([`RunCore::apply_speculation`]).
    pub fn apply_speculation(&mut self, default: Option<SpecOptions>) {
        self.core.apply_speculation(default);
    }

    fn take_logprobs(&mut self, lps: Vec<TokenLogprob>) -> Option<ChoiceLogprobs> {
        if !self.core.logprobs {
            return None;
        }
        self.logprobs.extend(lps.iter().cloned());
        Some(ChoiceLogprobs { content: lps })
    }

    /// The events as one delta (kept in the whole message too).
    fn delta(&mut self, events: Vec<Event>) -> Delta {
        let mut d = Delta::default();
        for e in events {
            match e {
                Event::Content(t) => {
                    self.content.push_str(&t);
                    d.content.get_or_insert_with(String::new).push_str(&t);
                }
                Event::Reasoning(t) => {
                    self.reasoning.push_str(&t);
                    d.reasoning_content
                        .get_or_insert_with(String::new)
                        .push_str(&t);
                }
                Event::ToolStart { index, id, name } => d
                    .tool_calls
                    .get_or_insert_with(Vec::new)
                    .push(ToolCallDelta {
                        index,
                        id: Some(id),
                        kind: Some("function".into()),
                        function: FunctionDelta {
                            name: Some(name),
                            arguments: Some(String::new()),
                        },
                    }),
                Event::ToolArgs { index, text } => {
                    let calls = d.tool_calls.get_or_insert_with(Vec::new);
                    match calls.last_mut() {
                        Some(c) if c.index == index => c
                            .function
                            .arguments
                            .get_or_insert_with(String::new)
                            .push_str(&text),
                        _ => calls.push(ToolCallDelta {
                            index,
                            id: None,
                            kind: None,
                            function: FunctionDelta {
                                name: None,
                                arguments: Some(text),
                            },
                        }),
                    }
                }
            }
        }
        d
    }

    fn chunk(
        &self,
        delta: Delta,
        logprobs: Option<ChoiceLogprobs>,
        finish_reason: Option<super::response::FinishReason>,
    ) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.core.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.core.created,
            model: self.core.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                logprobs,
                finish_reason,
            }],
            usage: None,
            timings: None,
        }
    }
}

impl Run for ChatRun {
    type Chunk = ChatCompletionChunk;
    type Response = ChatCompletion;

    fn core(&self) -> &RunCore {
        &self.core
    }

    fn first_chunk(&self) -> Option<ChatCompletionChunk> {
        Some(self.chunk(
            Delta {
                role: Some("assistant".into()),
                content: Some(String::new()),
                ..Delta::default()
            },
            None,
            None,
        ))
    }

    fn push(
        &mut self,
        tokenizer: &Tokenizer,
        text: &str,
        logprobs: Option<TokenLogprobs>,
    ) -> Option<ChatCompletionChunk> {
        let (events, lps) = self.core.output.push(tokenizer, text, logprobs);
        let delta = self.delta(events);
        if delta == Delta::default() && lps.is_empty() {
            return None;
        }
        let lps = self.take_logprobs(lps);
        Some(self.chunk(delta, lps, None))
    }

    fn finish(&mut self, stats: &GenerateStats) -> (Vec<ChatCompletionChunk>, ChatCompletion) {
        let (events, lps) = self.core.output.finish();
        let delta = self.delta(events);
        let lps = self.take_logprobs(lps);
        let reason = self.core.finish_reason(stats);
        let mut chunks = vec![self.chunk(delta, lps, Some(reason))];
        let usage = self.core.usage(stats);
        if self.core.include_usage {
            let mut last = self.chunk(Delta::default(), None, None);
            last.choices.clear();
            last.usage = Some(usage.clone());
            chunks.push(last);
        }
        let timings = self.core.timings(stats);
        if let Some(last) = chunks.last_mut() {
            last.timings = Some(timings.clone());
        }
        let calls = self.core.output.calls().to_vec();
        let content =
            (calls.is_empty() || !self.content.trim().is_empty()).then(|| self.content.clone());
        let reasoning = self.reasoning.trim_end();
        let response = ChatCompletion {
            id: self.core.id.clone(),
            object: "chat.completion".into(),
            created: self.core.created,
            model: self.core.model.clone(),
            choices: vec![Choice {
                index: 0,
                message: AssistantMessage {
                    role: "assistant".into(),
                    content,
                    reasoning_content: (!reasoning.is_empty()).then(|| reasoning.to_string()),
                    tool_calls: (!calls.is_empty()).then_some(calls),
                    refusal: None,
                },
                logprobs: self.core.logprobs.then(|| ChoiceLogprobs {
                    content: self.logprobs.clone(),
                }),
                finish_reason: reason,
            }],
            usage,
            timings: Some(timings),
        };
        (chunks, response)
    }
}
