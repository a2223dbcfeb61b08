//! The request's values checked against OpenAI's ranges and this runtime's limits, each
//! error naming its field, and turned into the engine's settings ([`SamplerConfig`]) and
//! the run's (stop strings, logprobs, streaming, context policy, speculative decoding).

use super::error::ApiError;
use super::ids;
use super::speculative::{self, SpecChoice};
use super::types::{ContextPolicy, Params};
use crate::sampler::{SamplerConfig, MAX_LOGPROBS};

/// OpenAI's defaults where a request leaves a sampling value out.
pub const DEFAULT_TEMPERATURE: f32 = 1.0;

/// The checked settings both kinds of request share.
#[derive(Clone, Debug)]
pub struct Checked {
    pub sampler: SamplerConfig,
    /// The reply's limit, if the request set one.
    pub max_tokens: Option<usize>,
    pub stops: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub policy: ContextPolicy,
    /// What the request asked of speculative decoding.
    pub speculative: SpecChoice,
}

fn in_range(param: &str, value: Option<f64>, lo: f64, hi: f64) -> Result<(), ApiError> {
    match value {
        Some(v) if !(lo..=hi).contains(&v) => Err(ApiError::invalid(
            param,
            format!("{v} is out of range for '{param}': it must be in [{lo}, {hi}]"),
        )),
        _ => Ok(()),
    }
}

/// Check the shared fields of a request for a model of `vocab` tokens and a cache of
/// `context` positions; `max_tokens` and `logprobs` are the request's own fields (name,
/// value): the reply's limit and the alternatives asked for (`None`: no logprobs).
pub fn check(
    p: &Params,
    max_tokens: (&str, Option<i64>),
    logprobs: (&str, Option<usize>),
    vocab: usize,
    context: usize,
) -> Result<Checked, ApiError> {
    in_range("temperature", p.temperature, 0.0, 2.0)?;
    if let Some(t) = p.top_p.filter(|t| !(*t > 0.0 && *t <= 1.0)) {
        return Err(ApiError::invalid(
            "top_p",
            format!("{t} is out of range for 'top_p': it must be in (0, 1]"),
        ));
    }
    in_range("min_p", p.min_p, 0.0, 1.0)?;
    in_range("frequency_penalty", p.frequency_penalty, -2.0, 2.0)?;
    in_range("presence_penalty", p.presence_penalty, -2.0, 2.0)?;
    if let Some(r) = p
        .repetition_penalty
        .filter(|r| !(*r > 0.0 && r.is_finite()))
    {
        return Err(ApiError::invalid(
            "repetition_penalty",
            format!("{r} is out of range for 'repetition_penalty': it must be > 0"),
        ));
    }
    if let Some(n) = p.n.filter(|&n| n != 1) {
        return Err(ApiError::unsupported(
            "n",
            format!("n = {n}: only one choice per request (n = 1) is supported"),
        ));
    }
    let top_k = non_negative("top_k", p.top_k)?.unwrap_or(0);
    let (field, max_tokens) = max_tokens;
    let max_tokens = match max_tokens {
        Some(n) if n < 1 => {
            return Err(ApiError::invalid(
                field,
                format!("{field} = {n}: at least 1 token must be generated"),
            ))
        }
        n => n.map(|n| n as usize),
    };
    let penalty_last_n = match p.repeat_last_n {
        None => SamplerConfig::greedy().penalty_last_n,
        Some(-1) => context,
        Some(n) => non_negative("repeat_last_n", Some(n))?.unwrap_or(0),
    };
    let mut logit_bias = vec![];
    for (key, &bias) in p.logit_bias.iter().flatten() {
        let token = key.parse::<u32>().ok().filter(|&t| (t as usize) < vocab);
        let Some(token) = token else {
            return Err(ApiError::invalid(
                "logit_bias",
                format!("logit_bias key {key:?} is not a token id of this model (0..{vocab})"),
            ));
        };
        in_range("logit_bias", Some(bias), -100.0, 100.0)?;
        logit_bias.push((token, bias as f32));
    }
    let (logprobs_field, logprobs) = logprobs;
    if logprobs.is_some_and(|n| n > MAX_LOGPROBS) {
        return Err(ApiError::invalid(
            logprobs_field,
            format!("at most {MAX_LOGPROBS} alternatives per token"),
        ));
    }
    let spec = speculative::check(p.speculative)?;
    let seed = p.seed.map_or_else(ids::fresh_seed, |s| s as u64);
    let sampler = SamplerConfig {
        temperature: p.temperature.map_or(DEFAULT_TEMPERATURE, |t| t as f32),
        top_k,
        top_p: p.top_p.map_or(1.0, |t| t as f32),
        min_p: p.min_p.map_or(0.0, |v| v as f32),
        repetition_penalty: p.repetition_penalty.map_or(1.0, |v| v as f32),
        frequency_penalty: p.frequency_penalty.map_or(0.0, |v| v as f32),
        presence_penalty: p.presence_penalty.map_or(0.0, |v| v as f32),
        penalty_last_n,
        logit_bias,
        logprobs,
        seed,
    };
    sampler.validate()?;
    Ok(Checked {
        sampler,
        max_tokens,
        stops: p.stop.as_ref().map(|s| s.strings()).unwrap_or_default(),
        stream: p.stream.unwrap_or(false),
        include_usage: p
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false),
        policy: p.context_overflow.unwrap_or_default(),
        speculative: spec,
    })
}

fn non_negative(param: &str, value: Option<i64>) -> Result<Option<usize>, ApiError> {
    match value {
        Some(v) if v < 0 => Err(ApiError::invalid(
            param,
            format!("{param} = {v} must be ≥ 0"),
        )),
        v => Ok(v.map(|v| v as usize)),
    }
}

/// `top_logprobs` of a chat request: 0–20 and only with `logprobs: true`. Returns the
/// alternatives asked for (`None`: no logprobs).
pub fn chat_logprobs(logprobs: Option<bool>, top: Option<i64>) -> Result<Option<usize>, ApiError> {
    let top = non_negative("top_logprobs", top)?;
    match (logprobs.unwrap_or(false), top) {
        (false, Some(_)) => Err(ApiError::invalid(
            "top_logprobs",
            "top_logprobs requires logprobs: true",
        )),
        (false, None) => Ok(None),
        (true, top) => Ok(Some(top.unwrap_or(0))),
    }
}
