//! [`Generation`]: one generation's token-by-token state (sampler, stop conditions, text
//! streaming, stats, speculative drafts), apart from how the model steps.

use super::{common_prefix, ContextOverflow, FinishReason, GenerateOptions, GenerateStats, Shift};
use crate::error::{Error, Result};
use crate::sampler::Sampler;
use crate::speculate::{DraftModel, Drafter, Proposal};
use crate::tokenizer::{StreamDecoder, Tokenizer};
use web_time::Instant;

/// The token-by-token logic of one generation (end of sequence, token limit, full
/// context, text streaming, stats), apart from how the model steps: [`Session`] drives it
/// with the blocking engine, the browser build with awaited GPU steps.
pub struct Generation {
    sampler: Sampler,
    stream: StreamDecoder,
    eos: Vec<u32>,
    max_tokens: usize,
    context: usize,
    text: String,
    generated: usize,
    prompt_tokens: usize,
    reused: usize,
    t_start: Instant,
    t_first: Option<Instant>,
    finish: Option<FinishReason>,
    /// The sliding window's `keep`, under [`ContextOverflow::SlidingWindow`].
    slide: Option<usize>,
    shifts: usize,
    /// The drafts of speculative decoding, when asked for.
    drafter: Option<Drafter>,
}

impl Generation {
    /// Check a request of `tokens` against `opts` and a `context`-position cache that
    /// holds `cached`; returns how many leading tokens the cache can keep (at least the
    /// last token is processed again, for its logits).
    pub fn check(
        tokens: &[u32],
        opts: &GenerateOptions,
        context: usize,
        cached: &[u32],
    ) -> Result<usize> {
        opts.sampler.validate()?;
        if let Some(spec) = &opts.speculative {
            spec.validate()?;
        }
        if opts.max_tokens == 0 {
            return Err(Error::InvalidArgument(
                "max_tokens must be at least 1".into(),
            ));
        }
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        if tokens.len() > context {
            return Err(Error::ContextTooLong {
                position: tokens.len(),
                context,
            });
        }
        Ok(common_prefix(cached, tokens).min(tokens.len() - 1))
    }

    /// A generation after a prompt of `prompt_tokens` (of which `reused` were cached);
    /// the clock starts now.
    pub fn new(
        opts: &GenerateOptions,
        eos: &[u32],
        context: usize,
        prompt_tokens: usize,
        reused: usize,
    ) -> Result<Generation> {
        let mut sampler = Sampler::new(opts.sampler.clone())?;
        sampler.constrain(opts.constraint.clone());
        Ok(Generation {
            sampler,
            stream: StreamDecoder::new(true),
            eos: eos.to_vec(),
            max_tokens: opts.max_tokens,
            context,
            text: String::new(),
            generated: 0,
            prompt_tokens,
            reused,
            t_start: Instant::now(),
            t_first: None,
            finish: None,
            slide: match opts.overflow {
                ContextOverflow::SlidingWindow { keep } => Some(keep),
                ContextOverflow::Error => None,
            },
            shifts: 0,
            drafter: opts.speculative.map(Drafter::new),
        })
    }

    /// The sampler each step chooses the next token with.
    pub fn sampler(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    /// Whether this generation drafts tokens (speculative decoding).
    pub fn speculates(&self) -> bool {
        self.drafter.is_some()
    }

    /// The drafts for the positions after `history` (ending with the token about to be
    /// run), at most `room` ([`Drafter::propose`]); none without speculation.
    pub fn propose(
        &mut self,
        history: &[u32],
        model: Option<&mut DraftModel>,
        room: usize,
    ) -> Result<Proposal> {
        match &mut self.drafter {
            Some(d) => d.propose(history, &mut self.sampler, model, room),
            None => Ok(Proposal::default()),
        }
    }

    /// Note a verification step of `proposal` that kept its first `accepted` drafts.
    pub fn verified(&mut self, proposal: &Proposal, accepted: usize) {
        if let Some(d) = &mut self.drafter {
            d.observe(proposal, accepted);
        }
    }

    /// The prompt is processed and the first token chosen (ends the prompt timing; a
    /// context shift's refill counts as generation time).
    pub fn prompt_done(&mut self) {
        self.t_first.get_or_insert_with(Instant::now);
    }

    /// Take the token the model chose, with `position` tokens now in the cache. Returns
    /// its text (empty for end of sequence, or a partial UTF-8 character); after it,
    /// [`Generation::finished`] says whether to step again.
    pub fn accept(&mut self, tokenizer: &Tokenizer, next: u32, position: usize) -> Result<String> {
        if self.finish.is_some() {
            return Ok(String::new());
        }
        let eos = self.eos.contains(&next);
        self.sampler.accept(next, eos)?;
        if eos {
            self.finish = Some(FinishReason::Eos);
            return Ok(String::new());
        }
        self.generated += 1;
        let piece = self.stream.push(tokenizer, next)?;
        self.text.push_str(&piece);
        if self.generated >= self.max_tokens {
            self.finish = Some(FinishReason::MaxTokens);
        } else if position >= self.context {
            self.finish = Some(FinishReason::ContextFull);
        }
        Ok(piece)
    }

    /// Under a sliding window, once the cache of `cached` (the whole context) is full and
    /// the last accepted token did not fit: the shift that makes room for it (the first
    /// `keep` tokens, at most half the context, stay; the oldest half of the others go),
    /// and the generation goes on. `None` (it stays finished) under any other policy or
    /// finish. The driver rewinds the cache to `keep`, runs `refill`, then feeds the
    /// token.
    pub fn shift(&mut self, cached: &[u32]) -> Option<Shift> {
        let keep = self.slide?;
        if self.finish != Some(FinishReason::ContextFull) {
            return None;
        }
        let front = keep.min(self.context / 2).min(cached.len());
        // The token that did not fit counts: at least one position is freed.
        let drop = (cached.len() + 1 - front) / 2;
        self.finish = None;
        self.shifts += 1;
        Some(Shift {
            keep: front,
            refill: cached[front + drop..].to_vec(),
        })
    }

    /// Stop at the caller's request (after the last accepted token).
    pub fn stop(&mut self) {
        self.finish = Some(FinishReason::Stopped);
    }

    /// Why the generation ended, once it has.
    pub fn finished(&self) -> Option<FinishReason> {
        self.finish
    }

    /// Text held back at the end (an incomplete UTF-8 sequence, decoded lossily).
    pub fn flush(&mut self) -> String {
        let rest = self.stream.flush();
        self.text.push_str(&rest);
        rest
    }

    /// Counts and timings so far.
    pub fn stats(&self) -> GenerateStats {
        let t_first = self.t_first.unwrap_or(self.t_start);
        GenerateStats {
            prompt_tokens: self.prompt_tokens,
            reused_tokens: self.reused,
            prompt_seconds: (t_first - self.t_start).as_secs_f64(),
            generated_tokens: self.generated,
            generate_seconds: t_first.elapsed().as_secs_f64(),
            finish: self.finish.unwrap_or(FinishReason::Stopped),
            context_shifts: self.shifts,
            speculation: self
                .drafter
                .as_ref()
                .map(Drafter::stats)
                .unwrap_or_default(),
        }
    }

    /// The whole text and the stats.
    pub fn into_result(self) -> (String, GenerateStats) {
        let stats = self.stats();
        (self.text, stats)
    }
}
