//! The sampling settings of a request and their checks.

use crate::error::{Error, Result};

/// How to pick the next token. `temperature <= 0` (or `top_k == 1`) is greedy; every
/// other control defaults to off. [`crate::sampler`] gives the order they apply in.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Logits are divided by this before the softmax; 0 means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0: no limit).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`
    /// (1: no limit).
    pub top_p: f32,
    /// Keep only tokens whose probability is at least `min_p` times the best one's
    /// (0: off; in [0, 1]).
    pub min_p: f32,
    /// Divide positive logits of recent tokens by this, multiply negative ones (llama.cpp
    /// and HF semantics; 1: off; > 0).
    pub repetition_penalty: f32,
    /// Subtract `count · frequency_penalty` from a recent token's logit, `count` its
    /// occurrences in the window (OpenAI's; 0: off; in [-2, 2]).
    pub frequency_penalty: f32,
    /// Subtract this from the logit of every token in the window (OpenAI's; 0: off; in
    /// [-2, 2]).
    pub presence_penalty: f32,
    /// The penalties' window: the last N tokens of the sequence, prompt included
    /// (llama.cpp's `repeat_last_n`; 0: no penalties).
    pub penalty_last_n: usize,
    /// (token id, value) added to that token's logit before anything else; values in
    /// [-100, 100], entries for the same id add up. An id outside the vocabulary is an
    /// error when a step meets it.
    pub logit_bias: Vec<(u32, f32)>,
    /// `Some(n)`: after each choice, the chosen token's log-probability and the `n ≤ 20`
    /// most likely tokens' ([`crate::sampler::Sampler::take_logprobs`]).
    pub logprobs: Option<usize>,
    /// Seed of the random generator.
    pub seed: u64,
}

/// Most alternatives `logprobs` may ask for (OpenAI's `top_logprobs` limit).
pub const MAX_LOGPROBS: usize = 20;

impl Default for SamplerConfig {
    /// Greedy decoding.
    fn default() -> SamplerConfig {
        SamplerConfig::greedy()
    }
}

/// `value` must lie in `lo..=hi` (and be a number).
fn check_range(field: &str, value: f32, lo: f32, hi: f32) -> Result<()> {
    if (lo..=hi).contains(&value) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{field} {value} must be in [{lo}, {hi}]"
    )))
}

impl SamplerConfig {
    /// Greedy decoding with every control off.
    pub fn greedy() -> SamplerConfig {
        SamplerConfig {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            logit_bias: Vec::new(),
            logprobs: None,
            seed: 0,
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
    }

    /// Whether any penalty or bias changes the logits (then every step needs them on the
    /// host or adjusted on the GPU, never the plain argmax).
    pub fn adjusts_logits(&self) -> bool {
        let penalised = self.repetition_penalty != 1.0
            || self.frequency_penalty != 0.0
            || self.presence_penalty != 0.0;
        !self.logit_bias.is_empty() || (self.penalty_last_n > 0 && penalised)
    }

    /// Reject settings that cannot mean anything (NaN, negative, p outside (0, 1], values
    /// outside OpenAI's ranges); the message names the field.
    pub fn validate(&self) -> Result<()> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(Error::InvalidArgument(format!(
                "temperature {} must be a finite number ≥ 0",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "top_p {} must be in (0, 1]",
                self.top_p
            )));
        }
        check_range("min_p", self.min_p, 0.0, 1.0)?;
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return Err(Error::InvalidArgument(format!(
                "repetition_penalty {} must be a finite number > 0",
                self.repetition_penalty
            )));
        }
        check_range("frequency_penalty", self.frequency_penalty, -2.0, 2.0)?;
        check_range("presence_penalty", self.presence_penalty, -2.0, 2.0)?;
        for &(token, bias) in &self.logit_bias {
            check_range(&format!("logit_bias of token {token}"), bias, -100.0, 100.0)?;
        }
        if let Some(n) = self.logprobs.filter(|&n| n > MAX_LOGPROBS) {
            return Err(Error::InvalidArgument(format!(
                "logprobs {n} must be at most {MAX_LOGPROBS}"
            )));
        }
        Ok(())
    }
}
