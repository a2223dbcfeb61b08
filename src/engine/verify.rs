//! Speculative decoding's verification step (`crate::speculate`): the token to run and
//! the drafts after it through the model as one batched step, every position's KV row
//! written; the caller rewinds past the first rejected draft (`Engine::rewind`).
//!
//! The fast CPU backend runs them as one prefill chunk (a token's numbers in a chunk are
//! its decode step's, so greedy verification chooses what decoding would); the oracle
//! token by token; the GPU as decode's step recorded once per token in one submit
//! (`crate::gpu::forward::verify`: bit-exact with decoding), at most
//! [`VERIFY_MAX_TOKENS`] a submit.

use super::{Engine, Inner};
use crate::cpu::fast::Logits;
use crate::error::{Error, Result};
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::forward::VERIFY_MAX_TOKENS;
use crate::sampler::Sampler;

/// Each verified position's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Verified {
    /// Every position's logits, `[position][vocab]`.
    Logits(Vec<f32>),
    /// Every position's argmax (plain greedy on the GPU: 4 bytes per position read back).
    Argmax(Vec<u32>),
}

impl Verified {
    /// Row `i`'s token, chosen as the plain step would have chosen it
    /// ([`Sampler::choose_drafted`]; a greedy row's argmax), and whether it is `draft`.
    pub fn choose(
        &self,
        i: usize,
        vocab: usize,
        draft: Option<u32>,
        sampler: &mut Sampler,
    ) -> Result<(u32, bool)> {
        match self {
            Verified::Logits(l) => sampler.choose_drafted(&l[i * vocab..(i + 1) * vocab], draft),
            Verified::Argmax(a) => Ok((a[i], Some(a[i]) == draft)),
        }
    }
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
        // Only the GPU arm reads it; the browser verifies through `WebModel::verify`.
        #[cfg(target_arch = "wasm32")]
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
                let chunks = tokens.chunks(VERIFY_MAX_TOKENS);
                let starts = (self.pos..).step_by(VERIFY_MAX_TOKENS);
                if argmax_only {
                    let mut ids = Vec::with_capacity(tokens.len());
                    for (chunk, pos) in chunks.zip(starts) {
                        ids.extend(model.verify_argmax(chunk, pos)?);
                    }
                    Verified::Argmax(ids)
                } else {
                    let mut rows = Vec::with_capacity(tokens.len() * self.config.vocab_size);
                    for (chunk, pos) in chunks.zip(starts) {
                        rows.extend(model.verify_logits(chunk, pos)?);
                    }
                    Verified::Logits(rows)
                }
            }
        };
        self.pos += tokens.len();
        Ok(out)
    }
}
