//! [`super::session::WebSession`]'s steps, speculative decoding's included
//! (`crate::speculate`), one token per call: a step runs the token to feed through the
//! model, with its drafts where the generation speculates and drafts were found
//! ([`WebModel::verify`], one batched step); each call then takes the next verified
//! row's token, chosen as the plain decoder would have chosen it, and keeps the row
//! where it is the draft ([`Verifying`]); the first that is not ends the step, and the
//! cache's rows after it go. The native loop, which takes all of a step's tokens at
//! once, is `crate::generate::speculative`.

use super::model::WebModel;
use crate::engine::Verified;
use crate::error::Result;
use crate::generate::Generation;
use crate::speculate::Proposal;

/// What a generation's next call takes its token from.
pub(super) enum Step {
    /// An accepted token, not yet in the cache: the call runs it first ([`Step::run`]).
    Feed(u32),
    /// The token a plain step chose, not yet accepted.
    Chosen(u32),
    /// A verification step whose rows are taken one per call.
    Verifying(Verifying),
}

impl Step {
    /// Run `fed` (not yet in the cache, which holds `cached`) at the cache's end: a
    /// verification step of `fed` and its drafts, or the plain step where there are none
    /// (a decode step costs less than a batch of one). The cache then holds `fed`.
    pub async fn run(
        model: &mut WebModel,
        cached: &mut Vec<u32>,
        gen: &mut Generation,
        fed: u32,
        gpu_draws: bool,
    ) -> Result<Step> {
        let pos = cached.len();
        // Drafts fill positions after `fed`'s, within the context and one step's rows.
        let room = (model.context().saturating_sub(pos + 1)).min(model.verify_max() - 1);
        cached.push(fed);
        let proposal = gen.propose(cached, None, room);
        cached.pop();
        let proposal = proposal?;
        if proposal.tokens.is_empty() {
            let next = model.step(fed, pos, gen.sampler(), gpu_draws).await?;
            cached.push(fed);
            gen.prompt_done();
            return Ok(Step::Chosen(next));
        }
        let mut batch = Vec::with_capacity(1 + proposal.tokens.len());
        batch.push(fed);
        batch.extend_from_slice(&proposal.tokens);
        let argmax_only = gen.sampler().candidates_needed().is_none();
        let rows = model.verify(&batch, pos, argmax_only).await?;
        cached.push(fed);
        gen.prompt_done();
        Ok(Step::Verifying(Verifying {
            proposal,
            rows,
            taken: 0,
        }))
    }
}

/// A verification step's rows (row `i`: what follows the fed token and the first `i`
/// drafts), and how many of its drafts were taken.
pub(super) struct Verifying {
    proposal: Proposal,
    rows: Verified,
    /// Drafts taken so far (the next row to choose from).
    taken: usize,
}

impl Verifying {
    /// The next row's token, chosen as the plain step would have chosen it
    /// ([`crate::sampler::Sampler::choose_drafted`]; a greedy row's argmax), and whether
    /// it is that row's draft. The caller accepts it ([`Generation::accept`]) before the
    /// next row.
    pub fn choose(&self, gen: &mut Generation, vocab: usize) -> Result<(u32, bool)> {
        let draft = self.proposal.tokens.get(self.taken).copied();
        self.rows.choose(self.taken, vocab, draft, gen.sampler())
    }

    /// The draft just chosen is taken: the cache holds it (the step wrote its row).
    pub fn keep(&mut self, token: u32, cached: &mut Vec<u32>) {
        self.taken += 1;
        cached.push(token);
    }

    /// The step ends with `held` positions in the cache: its drafts are counted (the
    /// adaptive draft length learns from them) and the rows past `held` go.
    pub fn end(self, gen: &mut Generation, model: &mut WebModel, held: usize) {
        gen.verified(&self.proposal, self.taken);
        model.rewind(held);
    }
}
