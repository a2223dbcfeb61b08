//! Choosing the next token from logits: greedy, or temperature / top-k / top-p sampling
//! with a seeded generator, so a run is reproducible on every backend and platform.
//!
//! Backends hand the sampler either the full logits ([`Sampler::sample_logits`]) or the
//! `k` largest logits already sorted ([`Sampler::sample_sorted`], what the GPU's top-k
//! kernel reads back). Both give the same token for the same state.

use crate::error::{Error, Result};
use rng::Rng;
use std::collections::VecDeque;

mod config;
mod rng;
pub use config::{SamplerConfig, MAX_LOGPROBS};

/// A sampler: its settings and its generator state.
#[derive(Clone, Debug)]
pub struct Sampler {
    pub config: SamplerConfig,
    rng: Rng,
    /// The last `penalty_last_n` tokens of the sequence, oldest first.
    recent: VecDeque<u32>,
    /// The last choice's log-probabilities, when the config asks for them.
    logprobs: Option<TokenLogprobs>,
}

/// The log-probabilities of one choice: those of the adjusted logits at temperature 1
/// over the whole vocabulary (what the model, penalties and bias made likely, before
/// temperature, top-k, top-p and min-p).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprobs {
    pub token: u32,
    pub logprob: f32,
    /// The most likely tokens (as many as the config's `logprobs`), best first.
    pub top: Vec<(u32, f32)>,
}

/// Orders candidates best first: larger logit, then lower id (NaN last).
fn better(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.partial_cmp(&a.1)
        .unwrap_or_else(|| a.1.is_nan().cmp(&b.1.is_nan()))
        .then(a.0.cmp(&b.0))
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Result<Sampler> {
        config.validate()?;
        Ok(Sampler {
            rng: Rng::new(config.seed),
            config,
            recent: VecDeque::new(),
            logprobs: None,
        })
    }

    /// The greedy sampler (no generator state is used).
    pub fn greedy() -> Sampler {
        Sampler {
            config: SamplerConfig::greedy(),
            rng: Rng::new(0),
            recent: VecDeque::new(),
            logprobs: None,
        }
    }

    /// Note tokens of the sequence (the prompt, then each accepted token) for the
    /// penalties' window: only the last `penalty_last_n` are kept.
    pub fn observe(&mut self, tokens: &[u32]) {
        let n = self.config.penalty_last_n;
        let tokens = &tokens[tokens.len().saturating_sub(n)..];
        let drop = (self.recent.len() + tokens.len()).saturating_sub(n);
        self.recent.drain(..drop);
        self.recent.extend(tokens);
    }

    /// The log-probabilities of the last choice (once), when the config asks for them.
    pub fn take_logprobs(&mut self) -> Option<TokenLogprobs> {
        self.logprobs.take()
    }

    /// How many top candidates the sampler needs: `None` for greedy (the argmax is
    /// enough), `Some(0)` for all logits, `Some(k)` for the `k` largest.
    pub fn candidates_needed(&self) -> Option<usize> {
        if self.config.is_greedy() {
            None
        } else {
            Some(self.config.top_k)
        }
    }

    /// Pick a token from the full logits.
    pub fn sample_logits(&mut self, logits: &[f32]) -> Result<u32> {
        let mut cands: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .map(|(i, &v)| (i as u32, v))
            .collect();
        let k = match self.candidates_needed() {
            None => 1,
            Some(0) => cands.len(),
            Some(k) => k.min(cands.len()),
        };
        if k == 0 {
            return Err(Error::InvalidArgument(
                "the logits are empty or all NaN".into(),
            ));
        }
        if k < cands.len() {
            cands.select_nth_unstable_by(k - 1, better);
            cands.truncate(k);
        }
        cands.sort_unstable_by(better);
        self.sample_sorted(&cands)
    }

    /// Pick a token from candidates sorted best first (at least the sampler's `top_k` of
    /// them, or all logits when `top_k` is 0).
    pub fn sample_sorted(&mut self, sorted: &[(u32, f32)]) -> Result<u32> {
        let c = &self.config;
        let Some(&(best, best_logit)) = sorted.first() else {
            return Err(Error::InvalidArgument(
                "no candidate tokens to sample".into(),
            ));
        };
        if c.is_greedy() || !best_logit.is_finite() {
            return Ok(best);
        }
        let k = if c.top_k == 0 {
            sorted.len()
        } else {
            c.top_k.min(sorted.len())
        };
        // Softmax over the kept candidates at the temperature, in f64.
        let inv_t = 1.0 / f64::from(c.temperature);
        let mut probs: Vec<f64> = sorted[..k]
            .iter()
            .map(|&(_, v)| ((f64::from(v) - f64::from(best_logit)) * inv_t).exp())
            .collect();
        let total: f64 = probs.iter().sum();
        // Top-p: the shortest prefix whose mass reaches p (at least one token).
        let mut kept = probs.len();
        if c.top_p < 1.0 {
            let mut acc = 0.0;
            for (i, p) in probs.iter().enumerate() {
                acc += p / total;
                if acc >= f64::from(c.top_p) {
                    kept = i + 1;
                    break;
                }
            }
        }
        probs.truncate(kept);
        let mass: f64 = probs.iter().sum();
        let mut r = self.rng.next_f64() * mass;
        for (i, p) in probs.iter().enumerate() {
            if r < *p {
                return Ok(sorted[i].0);
            }
            r -= p;
        }
        Ok(sorted[kept - 1].0)
    }
}

#[cfg(test)]
mod tests;
