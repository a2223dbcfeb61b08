//! Choosing the next token from logits, with a seeded generator so that a run is
//! reproducible on every backend and platform.
//!
//! Each step applies, in this order:
//! 1. `logit_bias`: the bias is added to the token's logit;
//! 2. the repetition penalty, to each token in the window (the last `penalty_last_n`
//!    tokens of the sequence, prompt included): a positive logit is divided by it, any
//!    other multiplied (llama.cpp and HF);
//! 3. the frequency and presence penalties (OpenAI's): `logit -= count · frequency +
//!    (count > 0) · presence`, `count` the token's occurrences in the window;
//! 4. the log-probabilities, when asked for: the log-softmax of these adjusted logits at
//!    temperature 1 over the whole vocabulary ([`TokenLogprobs`]);
//! 5. greedy: the argmax of the adjusted logits (the lower id on ties); else, at the
//!    temperature: top-k, then top-p (the shortest best-first prefix whose probability,
//!    renormalised over the top-k, reaches p), then min-p (keep tokens with p ≥ min_p ·
//!    p_max of the same temperature-scaled distribution), and a draw from what is kept.
//!
//! With a [`Constraint`] (structured output), only the tokens its mask allows are
//! candidates of step 5 (the log-probabilities of step 4 stay the model's); the GPU
//! applies the mask inside its argmax and top-k kernels.
//!
//! Steps 1–3 are a sparse list of (token, bias, repetition factor, penalty)
//! ([`LogitAdjust`]). Backends hand the sampler either the raw full logits
//! ([`Sampler::sample_logits`], which applies the list itself) or the `k` largest logits
//! already adjusted and sorted, with the normaliser `ln Σ exp` of all adjusted logits
//! when log-probabilities are asked for ([`Sampler::sample_sorted`]: the GPU applies
//! [`Sampler::adjustments`] in place before its top-k, so penalised or biased tokens
//! fall into or out of its readback as they should). Both give the same token for the
//! same state.
//!
//! The draw of step 5 is [`draw`], one uniform number per non-greedy step; its f64 exp
//! and ln (and the normaliser's) are the `libm` crate's, so native builds and the
//! browser's wasm CPU backend draw the same tokens. The GPU makes the same draw in f32
//! for the requests [`Sampler::gpu_draws`] accepts (pipelined decoding).

use crate::constrain::{self, Constraint};
use crate::error::{Error, Result};
use rng::Rng;
use std::collections::VecDeque;

mod adjust;
mod config;
mod rng;
mod verify;
pub use adjust::LogitAdjust;
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
    /// The grammar the output must match, if any.
    constraint: Option<Constraint>,
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

/// A step's candidates sorted best first, and the normaliser when logprobs are asked.
type Candidates = (Vec<(u32, f32)>, Option<f32>);

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
            constraint: None,
        })
    }

    /// The greedy sampler (no generator state is used).
    pub fn greedy() -> Sampler {
        Sampler {
            config: SamplerConfig::greedy(),
            rng: Rng::new(0),
            recent: VecDeque::new(),
            logprobs: None,
            constraint: None,
        }
    }

    /// Constrain the choices to a grammar (`None`: free).
    pub fn constrain(&mut self, constraint: Option<Constraint>) {
        self.constraint = constraint;
    }

    /// The grammar the choices follow, if any.
    pub fn constraint(&self) -> Option<&Constraint> {
        self.constraint.as_ref()
    }

    /// This step's allowed-token bitmask (tokenizer vocabulary bits, see
    /// [`Constraint::mask`]), `None` when unconstrained.
    pub fn mask(&mut self) -> Result<Option<&[u32]>> {
        match &mut self.constraint {
            Some(c) => c.mask().map(Some),
            None => Ok(None),
        }
    }

    /// The tokens the grammar forces next (empty when unconstrained or free): drafts a
    /// speculative step always accepts.
    pub fn forced_tokens(&mut self) -> Result<Vec<u32>> {
        Ok(match &mut self.constraint {
            Some(c) => c.forced_run(),
            None => vec![],
        })
    }

    /// Take the chosen token: it advances the grammar and (unless it ends the sequence,
    /// which the caller does not pass on) enters the penalties' window.
    pub fn accept(&mut self, token: u32, end_of_sequence: bool) -> Result<()> {
        if let Some(c) = &mut self.constraint {
            c.commit(token)?;
        }
        if !end_of_sequence {
            self.observe(&[token]);
        }
        Ok(())
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

    /// How many top candidates the sampler needs: `None` for plain greedy (the argmax
    /// is enough, and the next step may start before it is read: nothing depends on the
    /// token), `Some(0)` for all logits, `Some(k)` for the `k` largest (adjusted, with the
    /// normaliser when [`Sampler::wants_log_z`]).
    pub fn candidates_needed(&self) -> Option<usize> {
        let c = &self.config;
        let alternatives = c.logprobs.map_or(0, |n| n.max(1));
        if c.is_greedy() {
            if !c.adjusts_logits() && c.logprobs.is_none() && self.constraint.is_none() {
                return None;
            }
            return Some(alternatives.max(1));
        }
        match c.top_k {
            0 => Some(0),
            k => Some(k.max(alternatives)),
        }
    }

    /// Whether the step must also hand over `ln Σ exp` of all adjusted logits (for the
    /// log-probabilities).
    pub fn wants_log_z(&self) -> bool {
        self.config.logprobs.is_some()
    }

    /// This step's logit adjustments (bias and penalties) for a `vocab`-token model,
    /// sorted by token id; empty when there are none. An id at or past `vocab` (in
    /// `logit_bias`) is an error.
    pub fn adjustments(&self, vocab: usize) -> Result<Vec<LogitAdjust>> {
        adjust::adjustments(&self.config, self.recent.iter().copied(), vocab)
    }

    /// Pick a token from the full raw logits (the adjustments are applied here).
    pub fn sample_logits(&mut self, logits: &[f32]) -> Result<u32> {
        let (cands, log_z) = self.candidates(logits)?;
        self.sample_sorted(&cands, log_z)
    }

    /// The candidates a step chooses from, adjusted and sorted best first (as many as
    /// [`Sampler::candidates_needed`]; only the grammar's allowed tokens), and the
    /// normaliser `ln Σ exp` of all adjusted logits when log-probabilities are asked for.
    fn candidates(&mut self, logits: &[f32]) -> Result<Candidates> {
        let adjust = self.adjustments(logits.len())?;
        let log_z = self.wants_log_z().then(|| {
            let mut adjusted = logits.to_vec();
            for a in &adjust {
                adjusted[a.token as usize] = a.apply(adjusted[a.token as usize]);
            }
            adjust::log_sum_exp(&adjusted)
        });
        // The adjusted logit of token i (the list is sorted by token).
        let at = |i: usize| match adjust.binary_search_by_key(&(i as u32), |a| a.token) {
            Ok(j) => adjust[j].apply(logits[i]),
            Err(_) => logits[i],
        };
        let n = logits.len();
        let mut cands: Vec<(u32, f32)> = match self.mask()? {
            // Under a grammar: only the allowed tokens (the mask's set bits) are visited.
            Some(mask) => (0..mask.len())
                .filter(|&w| mask[w] != 0)
                .flat_map(|w| (0..32).map(move |b| w * 32 + b))
                .filter(|&i| i < n && constrain::allowed(mask, i as u32))
                .map(|i| (i as u32, at(i)))
                .filter(|(_, v)| !v.is_nan())
                .collect(),
            None => {
                let mut adjusted = logits.to_vec();
                for a in &adjust {
                    adjusted[a.token as usize] = a.apply(adjusted[a.token as usize]);
                }
                let numbered = adjusted.into_iter().enumerate();
                numbered
                    .filter(|(_, v)| !v.is_nan())
                    .map(|(i, v)| (i as u32, v))
                    .collect()
            }
        };
        let k = match self.candidates_needed() {
            None => 1,
            Some(0) => cands.len(),
            Some(k) => k.min(cands.len()),
        };
        if k == 0 {
            return Err(Error::InvalidArgument(
                "the logits are empty or all NaN (or the grammar allows no token)".into(),
            ));
        }
        if k < cands.len() {
            cands.select_nth_unstable_by(k - 1, better);
            cands.truncate(k);
        }
        cands.sort_unstable_by(better);
        Ok((cands, log_z))
    }

    /// Pick a token from adjusted candidates sorted best first (at least
    /// [`Sampler::candidates_needed`] of them, or all logits for `Some(0)`); `log_z` is
    /// `ln Σ exp` of all adjusted logits, needed when [`Sampler::wants_log_z`].
    pub fn sample_sorted(&mut self, sorted: &[(u32, f32)], log_z: Option<f32>) -> Result<u32> {
        let i = self.choose(sorted)?;
        self.record_logprobs(sorted, i, log_z)?;
        Ok(sorted[i].0)
    }

    /// Keep the log-probabilities of choosing `sorted[i]`, when the config asks for them.
    fn record_logprobs(
        &mut self,
        sorted: &[(u32, f32)],
        i: usize,
        log_z: Option<f32>,
    ) -> Result<()> {
        if let Some(n) = self.config.logprobs {
            let log_z = log_z.ok_or_else(|| {
                Error::InvalidArgument("logprobs need the logits' normaliser".into())
            })?;
            let logprob = |&(token, logit): &(u32, f32)| (token, logit - log_z);
            let (token, logprob_chosen) = logprob(&sorted[i]);
            self.logprobs = Some(TokenLogprobs {
                token,
                logprob: logprob_chosen,
                top: sorted.iter().take(n).map(logprob).collect(),
            });
        }
        Ok(())
    }

    /// The index in `sorted` of the chosen candidate: the first when greedy, else a draw
    /// ([`draw`]) with the generator's next number (one per non-greedy step, whatever
    /// the candidates: the GPU's pipelined draw takes its numbers before it sees them).
    fn choose(&mut self, sorted: &[(u32, f32)]) -> Result<usize> {
        if sorted.is_empty() {
            return Err(Error::InvalidArgument(
                "no candidate tokens to sample".into(),
            ));
        }
        if self.config.is_greedy() {
            return Ok(0);
        }
        let r = self.rng.next_f64();
        Ok(draw(&self.config, sorted, r))
    }

    /// The settings and generator of a sampler whose draws the GPU can make from its
    /// top-k candidates ([`GpuDraws`]), `None` when it cannot: greedy (the argmax does),
    /// logit adjustments (penalties follow the generated tokens), a grammar, logprobs,
    /// or a top-k of 0 or past the GPU's 64 candidates. The draws continue this
    /// sampler's generator from where it is (a copy: this sampler's own is left as is).
    pub fn gpu_draws(&self, max_candidates: usize) -> Option<GpuDraws> {
        let c = &self.config;
        let fits = (1..=max_candidates).contains(&c.top_k);
        let plain = !c.adjusts_logits() && c.logprobs.is_none() && self.constraint.is_none();
        (!c.is_greedy() && fits && plain).then(|| GpuDraws {
            rng: self.rng.clone(),
            config: c.clone(),
        })
    }

    /// Go on with the generator where the GPU's draws (from [`Sampler::gpu_draws`]) left
    /// it, so that later draws do not repeat theirs.
    pub fn resume_after(&mut self, draws: GpuDraws) {
        self.rng = draws.rng;
    }
}

/// The draw of one sampled step from candidates sorted best first (adjusted logits), `r`
/// uniform in [0, 1): the index of the chosen one. At the temperature: top-k, then top-p
/// (the shortest best-first prefix whose probability, renormalised over the top-k,
/// reaches p), then min-p (p ≥ min_p · p_max), and the first candidate whose cumulative
/// weight passes `r` · the kept mass. The single definition of a draw: the GPU's
/// (shaders/sample_draw.wgsl) is this in f32. `config` is not greedy; `sorted` is not
/// empty.
pub fn draw(c: &SamplerConfig, sorted: &[(u32, f32)], r: f64) -> usize {
    pick(&kept_weights(c, sorted), r)
}

/// The weights of the candidates a draw keeps (top-k, top-p, min-p at the temperature;
/// relative to the best, whose weight is 1), best first: [`draw`]'s distribution, to be
/// normalised by its sum. A non-finite best logit keeps the best alone.
pub(crate) fn kept_weights(c: &SamplerConfig, sorted: &[(u32, f32)]) -> Vec<f64> {
    let best_logit = sorted[0].1;
    if !best_logit.is_finite() {
        return vec![1.0];
    }
    let k = if c.top_k == 0 {
        sorted.len()
    } else {
        c.top_k.min(sorted.len())
    };
    // Softmax over the kept candidates at the temperature, in f64, relative to the
    // best (its weight is 1, so a weight is also p / p_max).
    let inv_t = 1.0 / f64::from(c.temperature);
    let mut probs: Vec<f64> = sorted[..k]
        .iter()
        .map(|&(_, v)| libm::exp((f64::from(v) - f64::from(best_logit)) * inv_t))
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
    // Min-p: p ≥ min_p · p_max (the best always stays).
    let min_p = f64::from(c.min_p);
    kept = probs[..kept].iter().take_while(|&&w| w >= min_p).count();
    probs.truncate(kept);
    probs
}

/// The first index whose cumulative weight passes `r` (uniform in [0, 1)) · the total.
pub(crate) fn pick(weights: &[f64], r: f64) -> usize {
    let mass: f64 = weights.iter().sum();
    let mut r = r * mass;
    for (i, p) in weights.iter().enumerate() {
        if r < *p {
            return i;
        }
        r -= p;
    }
    // Rounding past the end: the last candidate that has weight.
    weights.iter().rposition(|&w| w > 0.0).unwrap_or(0)
}

/// What the GPU needs to draw a sampler's tokens itself ([`Sampler::gpu_draws`]): the
/// settings, and the generator that supplies one uniform number per step. Equal when
/// their next draws are (a step drawn ahead is valid while its draws equal the host's).
#[derive(Clone, Debug, PartialEq)]
pub struct GpuDraws {
    pub config: SamplerConfig,
    rng: Rng,
}

impl GpuDraws {
    /// The next step's uniform number in [0, 1) (the one [`Sampler`] would draw).
    pub fn next_uniform(&mut self) -> f64 {
        self.rng.next_f64()
    }
}

#[cfg(test)]
mod tests;
