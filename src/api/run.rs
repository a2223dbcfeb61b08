//! What one request's run shares between chat and plain completions, whatever drives the
//! model: the prompt and [`GenerateOptions`] the driver runs, the output filters each
//! token's text goes through, the request's speculative decoding resolved against the
//! front end's default, and the usage, timings and finish reason from the driver's stats.

use super::ids;
use super::output::Output;
use super::response::{FinishReason, PromptTokensDetails, SpeculativeUsage, Timings, Usage};
use super::speculative::SpecChoice;
use super::validate::Checked;
use crate::constrain::Constraint;
use crate::generate::{self, ContextOverflow, GenerateOptions, GenerateStats};
use crate::sampler::TokenLogprobs;
use crate::speculate::SpecOptions;
use crate::tokenizer::Tokenizer;

/// The model name a response reports when the request names none.
pub const DEFAULT_MODEL: &str = "pocketrt";

/// What every run holds: ids, the prompt and options, the output filters.
#[derive(Clone, Debug)]
pub struct RunCore {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
    pub(crate) prompt: Vec<u32>,
    pub(crate) options: GenerateOptions,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    pub(crate) output: Output,
    /// Logprobs asked for.
    pub(crate) logprobs: bool,
    /// The request's `speculative` ([`RunCore::apply_speculation`]).
    pub(crate) speculative: SpecChoice,
}

impl RunCore {
    /// A run of `prompt` (fitted to `context`) with the request's checked settings.
    pub(crate) fn new(
        id_prefix: &str,
        model: Option<&str>,
        checked: Checked,
        prompt: Vec<u32>,
        context: usize,
        output: Output,
        constraint: Option<Constraint>,
    ) -> RunCore {
        let room = context.saturating_sub(prompt.len()).max(1);
        let logprobs = checked.sampler.logprobs.is_some();
        let speculative = checked.speculative;
        RunCore {
            id: ids::random_id(id_prefix, ids::fresh_seed()),
            created: ids::now(),
            model: model.unwrap_or(DEFAULT_MODEL).to_string(),
            prompt,
            options: GenerateOptions {
                max_tokens: checked.max_tokens.unwrap_or(room).min(room),
                sampler: checked.sampler,
                overflow: ContextOverflow::Error,
                constraint,
                speculative: speculative.resolve(None),
            },
            stream: checked.stream,
            include_usage: checked.include_usage,
            output,
            logprobs,
            speculative,
        }
    }

    /// Set the generation's speculative decoding ([`GenerateOptions::speculative`]) from
    /// the request's `speculative` and the front end's `default` (its `--spec`, or the
    /// browser's load option; `None`: no speculation unless the request asks): absent →
    /// `default`; `false` → off; `true` → `default`, or [`SpecOptions::lookup`] where it
    /// is `None`; `{"n_max": N}` → the same with at most N drafts per step. A run starts
    /// as if `default` were `None`; a front end calls this once, before it generates.
    pub fn apply_speculation(&mut self, default: Option<SpecOptions>) {
        self.options.speculative = self.speculative.resolve(default);
    }

    /// The response's usage: [`usage`], with pocketrt's `speculative` counts when the
    /// generation speculated.
    pub(crate) fn usage(&self, stats: &GenerateStats) -> Usage {
        let s = stats.speculation;
        Usage {
            speculative: self.options.speculative.map(|_| SpeculativeUsage {
                drafted: s.drafted,
                accepted: s.accepted,
                steps: s.steps,
            }),
            ..usage(stats)
        }
    }

    /// llama-server's `timings` of the generation (`draft_n`, `draft_n_accepted` when it
    /// speculated).
    pub(crate) fn timings(&self, stats: &GenerateStats) -> Timings {
        let per_token_ms = |tok_s: f64| if tok_s > 0.0 { 1e3 / tok_s } else { 0.0 };
        let spec = self.options.speculative.map(|_| stats.speculation);
        Timings {
            cache_n: stats.reused_tokens,
            prompt_n: stats.prompt_tokens - stats.reused_tokens,
            prompt_ms: stats.prompt_seconds * 1e3,
            prompt_per_token_ms: per_token_ms(stats.prompt_tok_s()),
            prompt_per_second: stats.prompt_tok_s(),
            predicted_n: stats.generated_tokens,
            predicted_ms: stats.generate_seconds * 1e3,
            predicted_per_token_ms: per_token_ms(stats.generate_tok_s()),
            predicted_per_second: stats.generate_tok_s(),
            draft_n: spec.map(|s| s.drafted),
            draft_n_accepted: spec.map(|s| s.accepted),
        }
    }

    /// Why the reply ended, from the driver's stats (a stop string stops the driver:
    /// `Stopped`). Tool calls end a reply that stopped by itself.
    pub(crate) fn finish_reason(&self, stats: &GenerateStats) -> FinishReason {
        match stats.finish {
            generate::FinishReason::MaxTokens | generate::FinishReason::ContextFull
                if !self.output.stopped() =>
            {
                FinishReason::Length
            }
            _ if !self.output.calls().is_empty() => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }
    }
}

/// OpenAI's usage from the driver's stats (`cached_tokens`: the KV cache's reuse).
pub fn usage(stats: &GenerateStats) -> Usage {
    Usage {
        prompt_tokens: stats.prompt_tokens,
        completion_tokens: stats.generated_tokens,
        total_tokens: stats.prompt_tokens + stats.generated_tokens,
        prompt_tokens_details: PromptTokensDetails {
            cached_tokens: stats.reused_tokens,
        },
        speculative: None,
    }
}

/// A request's run as a driver sees it (chat: [`super::ChatRun`], completions:
/// [`super::CompletionRun`]): the prompt and options to generate with, each token handed
/// in as it comes, the chunks to stream handed out, the response at the end.
pub trait Run {
    /// A streamed piece (`chat.completion.chunk` or a `text_completion` chunk).
    type Chunk;
    /// The whole response.
    type Response;

    /// The shared state (ids, prompt, options, filters).
    fn core(&self) -> &RunCore;

    /// The tokens to run (the whole conversation; the driver's cache skips what it
    /// holds).
    fn prompt(&self) -> &[u32] {
        &self.core().prompt
    }

    /// How to generate: the reply's limit (what fits the context unless the request set
    /// less) and the sampler settings (with `logprobs` when the request asked).
    fn options(&self) -> &GenerateOptions {
        &self.core().options
    }

    /// Whether the request asked for a stream (a server answers with SSE then).
    fn stream(&self) -> bool {
        self.core().stream
    }

    /// A stop string was generated: end the generation now.
    fn should_stop(&self) -> bool {
        self.core().output.stopped()
    }

    /// The chunk to stream before any token (chat: the assistant's role).
    fn first_chunk(&self) -> Option<Self::Chunk>;

    /// Take a generated token's text (may be empty: part of a character) and its
    /// log-probabilities (`Sampler::take_logprobs`). Returns the chunk to stream, if
    /// anything was decided.
    fn push(
        &mut self,
        tokenizer: &Tokenizer,
        text: &str,
        logprobs: Option<TokenLogprobs>,
    ) -> Option<Self::Chunk>;

    /// The generation ended with `stats`: the last chunks (what was held, the finish
    /// reason, the usage with `stream_options.include_usage`) and the whole response.
    fn finish(&mut self, stats: &GenerateStats) -> (Vec<Self::Chunk>, Self::Response);
}
