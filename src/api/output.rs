//! The reply's text through the streaming filters in order — stop strings over the raw
//! text, then the `<think>` split, then tool calls in the content — and each token's
//! log-probabilities released together with the text they produced.

use super::reasoning::{Part, ReasoningSplit};
use super::response::{TokenLogprob, ToolCall, TopLogprob};
use super::stop::StopFilter;
use super::tools::{ToolCallParser, ToolEvent};
use crate::sampler::TokenLogprobs;
use crate::tokenizer::Tokenizer;
use std::collections::VecDeque;

/// A decided piece of the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Content(String),
    Reasoning(String),
    ToolStart {
        index: u32,
        id: String,
        name: String,
    },
    ToolArgs {
        index: u32,
        text: String,
    },
}

/// The filters of one reply.
#[derive(Clone, Debug)]
pub struct Output {
    stop: StopFilter,
    /// `None` for plain completions.
    reasoning: Option<ReasoningSplit>,
    tools: ToolCallParser,
    logprobs: LogprobQueue,
}

impl Output {
    /// A chat reply to the rendered `prompt`; `tools` when the request has tools (calls
    /// get ids from `seed`).
    pub fn chat(stops: Vec<String>, prompt: &str, tools: bool, seed: u64) -> Output {
        Output {
            stop: StopFilter::new(stops),
            reasoning: Some(ReasoningSplit::new(prompt)),
            tools: ToolCallParser::new(tools, seed),
            logprobs: LogprobQueue::default(),
        }
    }

    /// A plain completion: only stop strings.
    pub fn plain(stops: Vec<String>) -> Output {
        Output {
            stop: StopFilter::new(stops),
            reasoning: None,
            tools: ToolCallParser::new(false, 0),
            logprobs: LogprobQueue::default(),
        }
    }

    /// Take a generated token's text (and log-probabilities): the events and logprobs
    /// now decided.
    pub fn push(
        &mut self,
        tokenizer: &Tokenizer,
        text: &str,
        logprobs: Option<TokenLogprobs>,
    ) -> (Vec<Event>, Vec<TokenLogprob>) {
        if let Some(lp) = logprobs.filter(|_| !self.stop.matched()) {
            self.logprobs.push(entry(tokenizer, &lp), text.len());
        }
        let released = self.stop.push(text);
        let mut events = vec![];
        self.route(&mut events, &released, false);
        let lps = self
            .logprobs
            .release(self.stop.released(), self.stop.matched());
        (events, lps)
    }

    /// A stop string was generated: generation should end.
    pub fn stopped(&self) -> bool {
        self.stop.matched()
    }

    /// The reply ended: everything still held.
    pub fn finish(&mut self) -> (Vec<Event>, Vec<TokenLogprob>) {
        let rest = self.stop.finish();
        let mut events = vec![];
        self.route(&mut events, &rest, true);
        let lps = self.logprobs.release(self.stop.released(), true);
        (events, lps)
    }

    /// The tool calls so far.
    pub fn calls(&self) -> &[ToolCall] {
        self.tools.calls()
    }

    fn route(&mut self, events: &mut Vec<Event>, text: &str, last: bool) {
        let mut parts = match &mut self.reasoning {
            Some(r) => r.push(text),
            None => vec![Part::Content(text.to_string())],
        };
        if last {
            parts.extend(
                self.reasoning
                    .as_mut()
                    .map(|r| r.finish())
                    .unwrap_or_default(),
            );
        }
        for part in parts {
            match part {
                Part::Reasoning(t) => events.push(Event::Reasoning(t)),
                Part::Content(t) => tool_events(events, self.tools.push(&t)),
            }
        }
        if last {
            tool_events(events, self.tools.finish());
        }
    }
}

fn tool_events(events: &mut Vec<Event>, from: Vec<ToolEvent>) {
    events.extend(from.into_iter().map(|e| match e {
        ToolEvent::Text(t) => Event::Content(t),
        ToolEvent::Start { index, id, name } => Event::ToolStart { index, id, name },
        ToolEvent::Args { index, text } => Event::ToolArgs { index, text },
    }));
}

/// A token's logprobs in OpenAI's shape (text lossily decoded, with its bytes).
fn entry(tokenizer: &Tokenizer, lp: &TokenLogprobs) -> TokenLogprob {
    let piece = |id: u32| {
        let bytes = tokenizer.token_bytes(id).unwrap_or_default().to_vec();
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    };
    let (token, bytes) = piece(lp.token);
    TokenLogprob {
        token,
        logprob: lp.logprob,
        bytes: Some(bytes),
        top_logprobs: lp
            .top
            .iter()
            .map(|&(id, logprob)| {
                let (token, bytes) = piece(id);
                TopLogprob {
                    token,
                    logprob,
                    bytes: Some(bytes),
                }
            })
            .collect(),
    }
}

/// Logprobs waiting for their token's text to pass the stop filter.
#[derive(Clone, Debug, Default)]
struct LogprobQueue {
    /// (entry, start, end) in bytes of generated text.
    waiting: VecDeque<(TokenLogprob, usize, usize)>,
    generated: usize,
}

impl LogprobQueue {
    fn push(&mut self, e: TokenLogprob, len: usize) {
        let start = self.generated;
        self.generated += len;
        self.waiting.push_back((e, start, self.generated));
    }

    /// The entries whose text is released (`released` bytes); at the end (`last`) also
    /// those whose text starts before the cut (a token holding a stop string's start).
    fn release(&mut self, released: usize, last: bool) -> Vec<TokenLogprob> {
        let mut out = vec![];
        while let Some((_, start, end)) = self.waiting.front() {
            if *end <= released || (last && *start < released) {
                out.push(self.waiting.pop_front().expect("front").0);
            } else {
                break;
            }
        }
        if last {
            self.waiting.clear();
        }
        out
    }
}
