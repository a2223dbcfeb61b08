//! Choosing the next token from logits: greedy, or temperature / top-k / top-p sampling
//! with a seeded generator, so a run is reproducible on every backend and platform.
//!
//! Backends hand the sampler either the full logits ([`Sampler::sample_logits`]) or the
//! `k` largest logits already sorted ([`Sampler::sample_sorted`], what the GPU's top-k
//! kernel reads back). Both give the same token for the same state.

use crate::error::{Error, Result};

/// How to pick the next token. `temperature <= 0` (or `top_k == 1`) is greedy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Logits are divided by this before the softmax; 0 means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0: no limit).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`
    /// (1: no limit).
    pub top_p: f32,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for SamplerConfig {
    /// Greedy decoding.
    fn default() -> SamplerConfig {
        SamplerConfig::greedy()
    }
}

impl SamplerConfig {
    pub fn greedy() -> SamplerConfig {
        SamplerConfig {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
    }

    /// Reject settings that cannot mean anything (NaN, negative, p outside (0, 1]).
    pub fn validate(&self) -> Result<()> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(Error::InvalidArgument(format!(
                "temperature {} must be a finite number ≥ 0",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "top-p {} must be in (0, 1]",
                self.top_p
            )));
        }
        Ok(())
    }
}

/// xoshiro256** seeded through splitmix64: small, fast and identical everywhere.
#[derive(Clone, Debug)]
struct Rng([u64; 4]);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A sampler: its settings and its generator state.
#[derive(Clone, Debug)]
pub struct Sampler {
    pub config: SamplerConfig,
    rng: Rng,
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
            config,
            rng: Rng::new(config.seed),
        })
    }

    /// The greedy sampler (no generator state is used).
    pub fn greedy() -> Sampler {
        Sampler {
            config: SamplerConfig::greedy(),
            rng: Rng::new(0),
        }
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
