//! The engine's part of an embedding (`crate::embed`): the normed final hidden states of
//! a sequence run from position 0, on every backend, leaving the engine's own sequence
//! (a conversation's KV cache and position) exactly as it was.
//!
//! The CPU backends run the tokens in a cache of their own. The GPU model has one cache,
//! bound into its pipelines, so the rows the embedding overwrites (positions
//! `0..min(tokens, held)`) are read back first and written back after (the f16 rows
//! bit for bit, as a session snapshot's restore does).

use super::{Engine, Inner};
use crate::error::Result;

impl Engine {
    /// `tokens` as a sequence of their own (positions `0..tokens.len()`): each token's
    /// final hidden state after the output norm, `[token][hidden_size]`. The engine's
    /// cache and position are as they were afterwards. Empty input and input longer than
    /// the context are errors.
    pub fn hidden_states(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        crate::embed::check_tokens(tokens, self.context)?;
        match &mut self.inner {
            Inner::Reference { model, .. } => model.hidden_states(tokens),
            Inner::Cpu { model, .. } => model.hidden_states(tokens),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => {
                let kept = tokens.len().min(self.pos);
                let saved = match kept {
                    0 => Vec::new(),
                    _ => model.read_kv(0, kept)?,
                };
                let rows = model.hidden_states(tokens, 0);
                model.with_kv_put_back(kept, &saved, rows)
            }
        }
    }
}
