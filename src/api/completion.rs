//! [`CompletionRun`]: one `/v1/completions` request (plain text continued), driven like
//! [`super::ChatRun`]: run [`CompletionRun::prompt`] with [`CompletionRun::options`], push
//! each token's text, stop on [`CompletionRun::should_stop`], then
//! [`CompletionRun::finish`]. Only stop strings filter the text (no reasoning or tools).

use super::context::fit_tokens;
use super::error::ApiError;

use super::output::Output;
use super::response::{
    Completion, CompletionChoice, CompletionLogprobs, FinishReason, TokenLogprob,
};
use super::run::{Run, RunCore};
use super::types::{CompletionRequest, Prompt};
use super::validate::check;
use crate::generate::GenerateStats;
use crate::sampler::TokenLogprobs;
use crate::speculate::SpecOptions;
use crate::tokenizer::Tokenizer;

/// One completions request in progress.
#[derive(Clone, Debug)]
pub struct CompletionRun {
    core: RunCore,
    /// The prompt's text when `echo` asks for it back.
    echo: Option<String>,
    text: String,
    logprobs: Vec<TokenLogprob>,
}

impl CompletionRun {
    /// Check `req` and encode its prompt for a model with `tokenizer` and `context`
    /// positions (applying the context policy: `"truncate"` keeps the newest tokens).
    pub fn new(
        req: &CompletionRequest,
        tokenizer: &Tokenizer,
        context: usize,
    ) -> Result<CompletionRun, ApiError> {
        if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::unsupported(
                "suffix",
                "suffix (insertion) is not supported",
            ));
        }
        let logprobs = match req.logprobs {
            Some(n) if n < 0 => return Err(ApiError::invalid("logprobs", "logprobs must be ≥ 0")),
            n => n.map(|n| n as usize),
        };
        let checked = check(
            &req.params,
            ("max_tokens", req.params.max_tokens),
            ("logprobs", logprobs),
            tokenizer.vocab_size(),
            context,
        )?;
        let constraint = super::format::constraint(&req.params, tokenizer)?;
        let (text, tokens) = match &req.prompt {
            Some(Prompt::Text(t)) => (t.clone(), tokenizer.encode(t, true)),
            Some(Prompt::Texts(t)) if t.len() == 1 => (t[0].clone(), tokenizer.encode(&t[0], true)),
            Some(Prompt::Tokens(ids))
                if ids.iter().all(|&t| (t as usize) < tokenizer.vocab_size()) =>
            {
                (tokenizer.decode(ids, false)?, ids.clone())
            }
            Some(Prompt::Tokens(_)) => {
                return Err(ApiError::invalid(
                    "prompt",
                    "a token id is outside the vocabulary",
                ))
            }
            Some(Prompt::Texts(_)) => {
                return Err(ApiError::unsupported(
                    "prompt",
                    "exactly one prompt per request",
                ))
            }
            None => return Err(ApiError::invalid("prompt", "prompt is required")),
        };
        if tokens.is_empty() {
            return Err(ApiError::invalid("prompt", "the prompt is empty"));
        }
        let room = checked.max_tokens.unwrap_or(1);
        let tokens = fit_tokens(tokens, room, context, checked.policy)?;
        let output = Output::plain(checked.stops.clone());
        let core = RunCore::new(
            "cmpl-",
            req.model.as_deref(),
            checked,
            tokens,
            context,
            output,
            constraint,
        );
        Ok(CompletionRun {
            core,
            echo: req.echo.unwrap_or(false).then_some(text),
            text: String::new(),
            logprobs: vec![],
        })
    }

    /// Resolve the request's `speculative` against the front end's `default`
    /// ([`RunCore::apply_speculation`]).
    pub fn apply_speculation(&mut self, default: Option<SpecOptions>) {
        self.core.apply_speculation(default);
    }

    fn take_text(&mut self, events: Vec<super::output::Event>) -> String {
        let mut text = String::new();
        for e in events {
            if let super::output::Event::Content(t) = e {
                text.push_str(&t);
            }
        }
        self.text.push_str(&text);
        text
    }

    /// The chunk's logprobs, its text starting at byte `offset` of the completion.
    fn take_logprobs(
        &mut self,
        lps: Vec<TokenLogprob>,
        offset: usize,
    ) -> Option<CompletionLogprobs> {
        if !self.core.logprobs {
            return None;
        }
        self.logprobs.extend(lps.iter().cloned());
        Some(completion_logprobs(&lps, offset))
    }

    fn chunk(
        &self,
        text: String,
        lps: Option<CompletionLogprobs>,
        reason: Option<FinishReason>,
    ) -> Completion {
        Completion {
            id: self.core.id.clone(),
            object: "text_completion".into(),
            created: self.core.created,
            model: self.core.model.clone(),
            choices: vec![CompletionChoice {
                index: 0,
                text,
                logprobs: lps,
                finish_reason: reason,
            }],
            usage: None,
            timings: None,
        }
    }
}

/// The completions API's parallel lists, token offsets counted from `offset`.
fn completion_logprobs(lps: &[TokenLogprob], mut offset: usize) -> CompletionLogprobs {
    let mut out = CompletionLogprobs::default();
    for lp in lps {
        out.tokens.push(lp.token.clone());
        out.token_logprobs.push(lp.logprob);
        out.top_logprobs.push(
            lp.top_logprobs
                .iter()
                .map(|t| (t.token.clone(), t.logprob))
                .collect(),
        );
        out.text_offset.push(offset);
        offset += lp.token.len();
    }
    out
}

impl Run for CompletionRun {
    type Chunk = Completion;
    type Response = Completion;

    fn core(&self) -> &RunCore {
        &self.core
    }

    fn first_chunk(&self) -> Option<Completion> {
        let echo = self.echo.clone()?;
        Some(self.chunk(echo, None, None))
    }

    fn push(
        &mut self,
        tokenizer: &Tokenizer,
        text: &str,
        logprobs: Option<TokenLogprobs>,
    ) -> Option<Completion> {
        let (events, lps) = self.core.output.push(tokenizer, text, logprobs);
        let text = self.take_text(events);
        if text.is_empty() && lps.is_empty() {
            return None;
        }
        let lps = self.take_logprobs(lps, self.text.len() - text.len());
        Some(self.chunk(text, lps, None))
    }

    fn finish(&mut self, stats: &GenerateStats) -> (Vec<Completion>, Completion) {
        let (events, lps) = self.core.output.finish();
        let text = self.take_text(events);
        let lps = self.take_logprobs(lps, self.text.len() - text.len());
        let reason = self.core.finish_reason(stats);
        let mut chunks = vec![self.chunk(text, lps, Some(reason))];
        let usage = self.core.usage(stats);
        if self.core.include_usage {
            let mut last = self.chunk(String::new(), None, None);
            last.choices.clear();
            last.usage = Some(usage.clone());
            chunks.push(last);
        }
        let timings = self.core.timings(stats);
        if let Some(last) = chunks.last_mut() {
            last.timings = Some(timings.clone());
        }
        let whole = format!("{}{}", self.echo.as_deref().unwrap_or(""), self.text);
        let all = self.logprobs.clone();
        let mut response = self.chunk(whole, None, Some(reason));
        if self.core.logprobs {
            response.choices[0].logprobs = Some(completion_logprobs(&all, 0));
        }
        response.usage = Some(usage);
        response.timings = Some(timings);
        (chunks, response)
    }
}
