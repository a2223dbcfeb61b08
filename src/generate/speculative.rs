//! [`Session`]'s speculative decoding (`crate::speculate`): each step runs the token to
//! feed and its drafts through the model at once ([`Engine::verify`]) and takes the
//! tokens the plain decoder would have chosen, up to and including the first that is
//! not the draft; the cache is rolled back past it.

use super::{Generation, Session, Token};
use crate::engine::Verified;
use crate::error::Result;
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
        let vocab = self.engine.config().vocab_size;
        let mut token = first;
        loop {
            let base = self.engine.position();
            // Drafts fill positions after `token`'s, within the context.
            let room = self.engine.context().saturating_sub(base + 1);
            self.cached.push(token);
            let proposal = gen.propose(&self.cached, self.draft.as_mut(), room);
            self.cached.pop();
            let proposal = proposal?;
            if proposal.tokens.is_empty() {
                // Nothing to verify: the plain step (a decode step costs less than a
                // batch of one).
                let next = self.engine.step_sampled(token, gen.sampler())?;
                self.cached.push(token);
                gen.prompt_done();
                let position = self.engine.position();
                if !Self::take_token(gen, &self.tokenizer, on_token, next, position)? {
                    return Ok(next);
                }
                token = next;
                continue;
            }
            let mut batch = Vec::with_capacity(1 + proposal.tokens.len());
            batch.push(token);
            batch.extend_from_slice(&proposal.tokens);
            let argmax_only = gen.sampler().candidates_needed().is_none();
            let rows = self.engine.verify(&batch, argmax_only)?;
            self.cached.push(token);
            gen.prompt_done();
            let (mut accepted, mut next, mut go_on) = (0, token, true);
            for (i, draft) in (0..batch.len()).map(|i| (i, proposal.tokens.get(i).copied())) {
                let (chosen, hit) = match &rows {
                    Verified::Logits(l) => {
                        let row = &l[i * vocab..(i + 1) * vocab];
                        gen.sampler().choose_drafted(row, draft)?
                    }
                    Verified::Argmax(a) => (a[i], Some(a[i]) == draft),
                };
                next = chosen;
                go_on = Self::take_token(gen, &self.tokenizer, on_token, chosen, base + i + 1)?;
                if !(hit && go_on) {
                    break;
                }
                // The draft is the chosen token: its row (written by this step) stays.
                accepted += 1;
                self.cached.push(chosen);
            }
            gen.verified(&proposal, accepted);
            self.engine.rewind(self.cached.len());
            if !go_on {
                return Ok(next);
            }
            token = next;
        }
    }
}
