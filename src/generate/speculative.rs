//! [`Session`]'s speculative decoding (`crate::speculate`): each step runs the token to
//! feed and its drafts through the model at once ([`Engine::verify`]) and takes the
//! tokens the plain decoder would have chosen, up to and including the first that is
//! not the draft; the cache is rolled back past it. Where nothing is drafted, tokens
//! come from plain steps (pipelined on the GPU) until the drafter has drafts again.

use super::{Generation, Session, Token};
use crate::error::Result;
use crate::speculate::{DraftModel, Proposal};
use crate::tokenizer::Tokenizer;

impl Session {
    /// [`Session::decode`] with drafts: run `first` (not yet in the cache) and the tokens
    /// it leads to until `gen` finishes; returns the last token taken, which the cache
    /// does not hold.
    pub(super) fn decode_speculative(
        &mut self,
        gen: &mut Generation,
        first: u32,
        on_token: &mut impl FnMut(&Tokenizer, Token<'_>) -> bool,
    ) -> Result<u32> {
        // Out of the session while plain steps borrow it (their interruption drafts).
        let mut draft = self.draft.take();
        let out = self.speculate(gen, first, on_token, &mut draft);
        self.draft = draft;
        out
    }

    fn speculate(
        &mut self,
        gen: &mut Generation,
        first: u32,
        on_token: &mut impl FnMut(&Tokenizer, Token<'_>) -> bool,
        draft: &mut Option<DraftModel>,
    ) -> Result<u32> {
        let context = self.engine.context();
        let mut token = first;
        let mut pending: Option<Proposal> = None;
        loop {
            let proposal = match pending.take() {
                Some(p) => p,
                None => propose(gen, &self.cached, token, draft, context)?,
            };
            if proposal.tokens.is_empty() {
                // Plain steps until the drafter has drafts for what follows a token.
                let mut interrupt = |gen: &mut Generation, cached: &[u32], next: u32| {
                    let p = propose(gen, cached, next, draft, context)?;
                    let stop = !p.tokens.is_empty();
                    pending = stop.then_some(p);
                    Ok(stop)
                };
                let (last, interrupted) =
                    self.decode_plain(gen, token, on_token, &mut interrupt)?;
                if !interrupted {
                    return Ok(last);
                }
                token = last;
                continue;
            }
            match self.verify_step(gen, token, &proposal, on_token)? {
                (next, true) => token = next,
                (last, false) => return Ok(last),
            }
        }
    }

    /// Run `token` and `proposal`'s drafts in one step, take the chosen tokens; returns
    /// the last token taken (not in the cache) and whether generation goes on.
    fn verify_step(
        &mut self,
        gen: &mut Generation,
        token: u32,
        proposal: &Proposal,
        on_token: &mut impl FnMut(&Tokenizer, Token<'_>) -> bool,
    ) -> Result<(u32, bool)> {
        let vocab = self.engine.config().vocab_size;
        let base = self.engine.position();
        let mut batch = Vec::with_capacity(1 + proposal.tokens.len());
        batch.push(token);
        batch.extend_from_slice(&proposal.tokens);
        let argmax_only = gen.sampler().candidates_needed().is_none();
        let rows = self.engine.verify(&batch, argmax_only)?;
        self.cached.push(token);
        gen.prompt_done();
        let (mut accepted, mut next, mut go_on) = (0, token, true);
        for i in 0..batch.len() {
            let draft = proposal.tokens.get(i).copied();
            let (chosen, hit) = rows.choose(i, vocab, draft, gen.sampler())?;
            next = chosen;
            go_on = Self::take_token(gen, &self.tokenizer, on_token, chosen, base + i + 1)?;
            if !(hit && go_on) {
                break;
            }
            // The draft is the chosen token: its row (written by this step) stays.
            accepted += 1;
            self.cached.push(chosen);
        }
        gen.verified(proposal, accepted);
        self.engine.rewind(self.cached.len());
        Ok((next, go_on))
    }
}

/// The drafts for what follows `next`, fed after `cached`, within the context.
fn propose(
    gen: &mut Generation,
    cached: &[u32],
    next: u32,
    draft: &mut Option<DraftModel>,
    context: usize,
) -> Result<Proposal> {
    let room = context.saturating_sub(cached.len() + 1);
    let mut history = Vec::with_capacity(cached.len() + 1);
    history.extend_from_slice(cached);
    history.push(next);
    gen.propose(&history, draft.as_mut(), room)
}
