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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::byte_level_json;

    fn lp(token: u32) -> Option<TokenLogprobs> {
        Some(TokenLogprobs {
            token,
            logprob: -0.5,
            top: vec![(token, -0.5)],
        })
    }

    #[test]
    fn logprobs_come_with_their_text_and_stop_with_the_stop_string() {
        let tok = Tokenizer::from_hf_json(&byte_level_json(&[])).unwrap();
        let mut out = Output::plain(vec!["XY".into()]);
        let mut push = |t: &str| {
            let (events, lps) = out.push(&tok, t, lp(u32::from(t.as_bytes()[0])));
            let text: String = events
                .iter()
                .map(|e| match e {
                    Event::Content(t) => t.as_str(),
                    other => panic!("{other:?}"),
                })
                .collect();
            (
                text,
                lps.iter().map(|l| l.token.clone()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(push("a"), ("a".into(), vec!["a".into()]));
        // "X" may start the stop string: its text and logprobs wait.
        assert_eq!(push("X"), (String::new(), vec![]));
        assert_eq!(push("b"), ("Xb".into(), vec!["X".into(), "b".into()]));
        assert_eq!(push("X"), (String::new(), vec![]));
        // The stop string: neither its text nor its tokens' logprobs come out.
        assert_eq!(push("Y"), (String::new(), vec![]));
        assert!(out.stopped());
        let (events, lps) = out.finish();
        assert!(events.is_empty() && lps.is_empty());
    }

    #[test]
    fn a_chat_reply_is_split_into_reasoning_content_and_tool_calls() {
        let tok = Tokenizer::from_hf_json(&byte_level_json(&[])).unwrap();
        let mut out = Output::chat(vec![], "<|im_start|>assistant\n", true, 1);
        let reply = "<think>\nhm\n</think>\n\nOK <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
        let mut events = vec![];
        for c in reply.chars() {
            events.extend(out.push(&tok, &c.to_string(), None).0);
        }
        events.extend(out.finish().0);
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| match e {
                Event::Reasoning(_) => "reasoning",
                Event::Content(_) => "content",
                Event::ToolStart { .. } => "start",
                Event::ToolArgs { .. } => "args",
            })
            .collect();
        assert_eq!(kinds.first(), Some(&"reasoning"));
        assert!(kinds.contains(&"content") && kinds.contains(&"start"));
        assert_eq!(out.calls()[0].function.arguments, "{}");
    }
}
