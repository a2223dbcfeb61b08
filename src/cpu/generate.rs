//! Greedy decoding: the deterministic continuation every backend must reproduce.

use crate::error::{Error, Result};

use super::model::Model;
use super::ops::argmax;

impl Model {
    /// The `n` tokens greedy decoding appends to `prompt` (argmax at every step, first
    /// index on ties). Exactly `n` tokens: end-of-sequence ids do not stop it, so the
    /// result compares one-to-one with a reference run of the same length.
    pub fn greedy(&self, prompt: &[u32], n: usize) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(n);
        self.greedy_with(prompt, n, |t| {
            out.push(t);
            true
        })?;
        Ok(out)
    }

    /// Greedy decoding that hands each new token to `on_token` as soon as it is chosen
    /// (for streaming); it stops after `n` tokens or when `on_token` returns false.
    /// Returns how many tokens were produced.
    pub fn greedy_with(
        &self,
        prompt: &[u32],
        n: usize,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<usize> {
        if prompt.is_empty() {
            return Err(Error::InvalidArgument(
                "greedy decoding needs at least one prompt token".into(),
            ));
        }
        let total = prompt
            .len()
            .checked_add(n)
            .ok_or_else(|| Error::InvalidArgument(format!("{n} new tokens is too many")))?;
        let mut cache = self.new_cache(total)?;
        let mut logits = Vec::new();
        for &t in prompt {
            logits = self.forward(t, &mut cache)?;
        }
        for produced in 0..n {
            let next = argmax(&logits)
                .ok_or_else(|| Error::InvalidArgument("logits are all NaN".into()))?
                as u32;
            if !on_token(next) {
                return Ok(produced + 1);
            }
            if produced + 1 < n {
                logits = self.forward(next, &mut cache)?;
            }
        }
        Ok(n)
    }
}
