//! A draft model: a smaller model of the target's vocabulary, run greedily on its own KV
//! cache, which follows the target's sequence (the common prefix kept, the rest fed).

use crate::constrain::Vocabulary;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::generate::common_prefix;

/// A draft model and the tokens its cache holds.
pub struct DraftModel {
    engine: Engine,
    cached: Vec<u32>,
}

impl DraftModel {
    /// A draft model for a target whose vocabulary is `target`'s: `draft` must map every
    /// id to the same bytes (same tokenizer), or its drafts would be another text's.
    pub fn new(
        engine: Engine,
        draft: &impl Vocabulary,
        target: &impl Vocabulary,
    ) -> Result<DraftModel> {
        let (n, m) = (draft.vocab_size(), target.vocab_size());
        if n != m {
            return Err(Error::InvalidArgument(format!(
                "the draft model's vocabulary has {n} tokens, the model's {m}: a draft \
                 model must share the model's tokenizer"
            )));
        }
        if let Some(id) = (0..n as u32).find(|&i| draft.token_bytes(i) != target.token_bytes(i)) {
            return Err(Error::InvalidArgument(format!(
                "the draft model's token {id} is not the model's ({:?} vs {:?}): a draft \
                 model must share the model's tokenizer",
                draft.id_to_token(id).unwrap_or(""),
                target.id_to_token(id).unwrap_or("")
            )));
        }
        Ok(DraftModel {
            engine,
            cached: Vec::new(),
        })
    }

    /// The draft engine (its description, its context).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Up to `k` greedy drafts for what follows `seq` (which ends with the token about to
    /// be run): the draft's cache is brought to `seq` without its last token (its common
    /// prefix kept), then the last token and each draft but the last are stepped. Fewer
    /// where the draft's context ends.
    pub fn propose(&mut self, seq: &[u32], k: usize) -> Result<Vec<u32>> {
        let Some((&last, head)) = seq.split_last() else {
            return Ok(vec![]);
        };
        let k = k.min(self.engine.context().saturating_sub(seq.len()));
        if k == 0 {
            return Ok(vec![]);
        }
        let keep = common_prefix(&self.cached, head);
        self.engine.rewind(keep);
        self.cached.truncate(keep);
        self.engine.feed_all(&head[keep..])?;
        self.cached.extend_from_slice(&head[keep..]);
        let mut drafts = Vec::with_capacity(k);
        let mut token = last;
        for _ in 0..k {
            let next = self.engine.step(token)?;
            self.cached.push(token);
            drafts.push(next);
            token = next;
        }
        Ok(drafts)
    }
}
