//! Speculative decoding's acceptance rule: a position whose token was drafted keeps the
//! draft or replaces it so that the chosen token's distribution is the plain sampler's.

use super::{kept_weights, pick, Sampler};
use crate::error::Result;

impl Sampler {
    /// Choose a position's token from its raw logits where `draft` was proposed for it;
    /// returns the token and whether it is the draft. Greedy: the (masked, adjusted)
    /// argmax, which accepts the draft when they are equal. Sampled: the draft is kept
    /// with probability p(draft) under the draw's distribution (the rule min(1, p / q)
    /// for a draft proposed with certainty, q = 1), else a token is drawn from p with the
    /// draft removed and renormalised (the residual max(0, p − q)), so every token keeps
    /// probability p (Leviathan et al. 2023; Chen et al. 2023). Without a draft: the
    /// plain choice ([`Sampler::sample_logits`]). The log-probabilities, the grammar and
    /// the penalties are the plain step's; the caller accepts the token
    /// ([`Sampler::accept`]) before the next position.
    pub fn choose_drafted(&mut self, logits: &[f32], draft: Option<u32>) -> Result<(u32, bool)> {
        let (cands, log_z) = self.candidates(logits)?;
        let i = match draft {
            Some(d) if !self.config.is_greedy() => self.choose_against(&cands, d),
            _ => self.choose(&cands)?,
        };
        self.record_logprobs(&cands, i, log_z)?;
        let token = cands[i].0;
        Ok((token, Some(token) == draft))
    }

    /// The sampled choice against the draft `d`: one uniform number to accept it with its
    /// probability, a second for the residual draw when it is rejected (one only when the
    /// draw keeps no weight on `d`: the residual is then p itself).
    fn choose_against(&mut self, sorted: &[(u32, f32)], d: u32) -> usize {
        let mut weights = kept_weights(&self.config, sorted);
        let r = self.rng.next_f64();
        let Some(j) = sorted[..weights.len()].iter().position(|c| c.0 == d) else {
            return pick(&weights, r);
        };
        let mass: f64 = weights.iter().sum();
        if r * mass < weights[j] {
            return j;
        }
        weights[j] = 0.0;
        pick(&weights, self.rng.next_f64())
    }
}
