//! Speculative decoding's verification step (`crate::speculate`): the token to run and
//! the drafts after it through the model as one batched step, every position's KV row
//! written; the caller rewinds past the first rejected draft (`Engine::rewind`).
//!
//! The fast CPU backend runs them as one prefill chunk (a token's numbers in a chunk are
//! its decode step's, so greedy verification chooses what decoding would); the oracle
//! token by token; the GPU as a prefill chunk whose head runs for every row.

use super::{Engine, Inner};
use crate::cpu::fast::Logits;
use crate::error::{Error, Result};

/// Each verified position's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Verified {
    /// Every position's logits, `[position][vocab]`.
    Logits(Vec<f32>),
    /// Every position's argmax (plain greedy on the GPU: 4 bytes per position read back).
    Argmax(Vec<u32>),
}

impl Engine {
    /// Run `tokens` at the next positions as one step; with `argmax_only` (plain greedy
    /// decoding) a backend may hand back each position's argmax alone. Nothing is run
    /// when they do not all fit the context.
    pub fn verify(&mut self, tokens: &[u32], argmax_only: bool) -> Result<Verified> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("nothing to verify".into()));
        }
        if self.pos + tokens.len() > self.context {
            return Err(Error::ContextTooLong {
                position: self.pos + tokens.len(),
                context: self.context,
            });
        }
        let _ = argmax_only;
        let out = match &mut self.inner {
            Inner::Reference { model, cache } => {
                let mut rows = Vec::with_capacity(tokens.len() * self.config.vocab_size);
                for &t in tokens {
                    rows.extend(model.forward(t, cache)?);
                }
                Verified::Logits(rows)
            }
            Inner::Cpu { model, cache } => {
                Verified::Logits(model.prefill(tokens, cache, Logits::All)?)
            }
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => {
                let rows = model.prefill_all_logits(tokens, self.pos)?;
                Verified::Logits(rows.concat())
            }
        };
        self.pos += tokens.len();
        Ok(out)
    }
}
