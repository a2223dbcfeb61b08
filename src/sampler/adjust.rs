//! The logit adjustments of one step as a sparse list (logit bias and the penalties of the
//! recent tokens), applied by the CPU backends to their logits and uploaded by the GPU
//! engine, which rewrites the same logits in place before its argmax and top-k
//! (shaders/logit_adjust.wgsl computes [`LogitAdjust::apply`] the same way).

use super::SamplerConfig;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// How one token's logit changes: `rep(logit + bias) - penalty`, where `rep(x)` is
/// `x / factor` for `x > 0` and `x · factor` otherwise. The GPU reads it as four words.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LogitAdjust {
    pub token: u32,
    /// The summed `logit_bias` of the token (0: none).
    pub bias: f32,
    /// The repetition penalty when the token is in the window, else 1.
    pub factor: f32,
    /// `count · frequency_penalty + presence_penalty` when the token is in the window
    /// `count` times, else 0.
    pub penalty: f32,
}

impl LogitAdjust {
    /// The adjusted logit.
    pub fn apply(&self, logit: f32) -> f32 {
        let x = logit + self.bias;
        let x = if x > 0.0 {
            x / self.factor
        } else {
            x * self.factor
        };
        x - self.penalty
    }
}

/// The adjustments of a step for `config` after the window `recent`, one per token,
/// sorted by id; empty when nothing is adjusted. Ids at or past `vocab` are an error.
pub(super) fn adjustments(
    config: &SamplerConfig,
    recent: impl Iterator<Item = u32>,
    vocab: usize,
) -> Result<Vec<LogitAdjust>> {
    if !config.adjusts_logits() {
        return Ok(vec![]);
    }
    // token → (bias, occurrences in the window).
    let mut tokens: BTreeMap<u32, (f32, u32)> = BTreeMap::new();
    for &(token, bias) in &config.logit_bias {
        tokens.entry(token).or_default().0 += bias;
    }
    let penalised = config.repetition_penalty != 1.0
        || config.frequency_penalty != 0.0
        || config.presence_penalty != 0.0;
    if penalised {
        recent.for_each(|token| tokens.entry(token).or_default().1 += 1);
    }
    if let Some((&token, _)) = tokens.range(vocab as u32..).next() {
        return Err(Error::InvalidArgument(format!(
            "logit_bias or penalty token {token} is outside the vocabulary of {vocab}"
        )));
    }
    let in_window = |count: u32, value: f32, off: f32| if count > 0 { value } else { off };
    Ok(tokens
        .into_iter()
        .map(|(token, (bias, count))| LogitAdjust {
            token,
            bias,
            factor: in_window(count, config.repetition_penalty, 1.0),
            penalty: in_window(
                count,
                count as f32 * config.frequency_penalty + config.presence_penalty,
                0.0,
            ),
        })
        .collect())
}

/// `ln Σ exp(logit)` over the non-NaN logits, in f64 (the normaliser of the
/// log-probabilities).
pub(super) fn log_sum_exp(logits: &[f32]) -> f32 {
    let finite = || logits.iter().filter(|v| !v.is_nan()).map(|&v| f64::from(v));
    let max = finite().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max as f32;
    }
    let sum: f64 = finite().map(|v| libm::exp(v - max)).sum();
    (max + libm::log(sum)) as f32
}

#[cfg(test)]
mod tests;
