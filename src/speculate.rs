//! Speculative decoding: drafts of the next tokens, verified by the target model in one
//! batched step ([`crate::engine::Engine::verify`]), so that a step can yield several
//! tokens. The output is the plain decoder's: greedy token for token, sampled in
//! distribution ([`crate::sampler::Sampler::choose_drafted`]).
//!
//! Drafts come from three sources, each optional ([`SpecOptions`]):
//! - **grammar**: the tokens a constraint forces next (one continuation only: JSON keys,
//!   a schema's punctuation), always accepted;
//! - **lookup**: the continuation of the longest recent n-gram of the request's own
//!   context (prompt and output so far) that also occurred earlier (`lookup.rs`; no second
//!   model: code edits, quotes, summaries and JSON repeat their input);
//! - **a draft model** sharing the target's vocabulary, run greedily on its own KV cache
//!   (`draft_model.rs`), where lookup finds nothing.
//!
//! How many are drafted adapts to what was accepted (`adapt.rs`): fewer after rejections,
//! none for a while after drafts that all failed, so that free text, where nothing
//! repeats, runs at the plain decoder's speed.

mod adapt;
mod draft_model;
mod lookup;

pub use adapt::DraftLength;
pub use draft_model::DraftModel;
pub use lookup::lookup;

use crate::error::{Error, Result};
use crate::sampler::Sampler;

/// Drafts per step when none is asked (llama.cpp's server drafts up to 16; a CPU's
/// verification costs more per extra row than a GPU's).
pub const DEFAULT_DRAFT_MAX: usize = 8;

/// Most drafts per step that may be asked.
pub const DRAFT_MAX_LIMIT: usize = 32;

/// Which drafts a generation makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecOptions {
    /// Draft from n-grams of the request's own context.
    pub lookup: bool,
    /// Draft with the session's draft model (where it has one).
    pub draft_model: bool,
    /// Draft the tokens a grammar forces.
    pub grammar: bool,
    /// Most drafts per step (the adaptive length's ceiling).
    pub draft_max: usize,
}

impl SpecOptions {
    /// Lookup and grammar drafts, up to [`DEFAULT_DRAFT_MAX`] per step.
    pub fn lookup() -> SpecOptions {
        SpecOptions {
            lookup: true,
            draft_model: false,
            grammar: true,
            draft_max: DEFAULT_DRAFT_MAX,
        }
    }

    /// A draft model's drafts where lookup finds none (and the grammar's).
    pub fn with_draft_model() -> SpecOptions {
        SpecOptions {
            draft_model: true,
            ..SpecOptions::lookup()
        }
    }

    /// `draft_max` checked: 1 to [`DRAFT_MAX_LIMIT`].
    pub fn validate(&self) -> Result<()> {
        if !(1..=DRAFT_MAX_LIMIT).contains(&self.draft_max) {
            return Err(Error::InvalidArgument(format!(
                "draft_max must be 1 to {DRAFT_MAX_LIMIT} (got {})",
                self.draft_max
            )));
        }
        Ok(())
    }
}

/// What speculation did in one generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Tokens drafted (and verified), forced ones included.
    pub drafted: usize,
    /// Of those, accepted.
    pub accepted: usize,
    /// Verification steps (each one batched step of the target).
    pub steps: usize,
}

impl SpecStats {
    /// Accepted drafts per verification step.
    pub fn accepted_per_step(&self) -> f64 {
        self.accepted as f64 / self.steps.max(1) as f64
    }
}

/// The drafts of one verification step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Proposal {
    pub tokens: Vec<u32>,
    /// How many of them, at the front, the grammar forces.
    pub forced: usize,
}

/// The drafts of one generation: its options, the adaptive length and the counts.
#[derive(Clone, Debug)]
pub struct Drafter {
    opts: SpecOptions,
    length: DraftLength,
    stats: SpecStats,
}

impl Drafter {
    pub fn new(opts: SpecOptions) -> Drafter {
        Drafter {
            opts,
            length: DraftLength::new(opts.draft_max),
            stats: SpecStats::default(),
        }
    }

    /// The drafts for the positions after `history` (the sequence so far, ending with
    /// the token about to be run), at most `room`: the grammar's forced run, then
    /// lookup's or the draft model's continuation, as many as the adaptive length allows.
    pub fn propose(
        &mut self,
        history: &[u32],
        sampler: &mut Sampler,
        model: Option<&mut DraftModel>,
        room: usize,
    ) -> Result<Proposal> {
        let mut tokens = Vec::new();
        if self.opts.grammar {
            tokens = sampler.forced_tokens()?;
            tokens.truncate(room);
        }
        let forced = tokens.len();
        let k = match room - forced {
            0 => 0,
            left => self.length.for_step().min(left),
        };
        if k > 0 {
            let mut seq = history.to_vec();
            seq.extend_from_slice(&tokens);
            let mut more = if self.opts.lookup {
                lookup(&seq, k)
            } else {
                vec![]
            };
            if more.is_empty() && self.opts.draft_model {
                if let Some(m) = model {
                    more = m.propose(&seq, k)?;
                }
            }
            tokens.extend(more);
        }
        Ok(Proposal { tokens, forced })
    }

    /// Note a verification step of `proposal` that kept its first `accepted` drafts (the
    /// grammar's forced ones say nothing of the lookup's or the model's aim).
    pub fn observe(&mut self, proposal: &Proposal, accepted: usize) {
        let (drafted, forced) = (proposal.tokens.len(), proposal.forced);
        self.stats.drafted += drafted;
        self.stats.accepted += accepted;
        self.stats.steps += 1;
        if drafted > forced {
            self.length
                .observe(drafted - forced, accepted.saturating_sub(forced));
        }
    }

    pub fn stats(&self) -> SpecStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
