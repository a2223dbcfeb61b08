//! Generation in the browser: the shared [`Generation`] logic driven by awaited steps
//! (WebGPU or the CPU backend),
//! one token per call so JavaScript can stream, stop and abort between tokens. The KV
//! cache is kept between requests: a request that starts with what the cache holds
//! processes only the rest. A generation that speculates (`crate::speculate`) verifies
//! drafts in one step and hands the tokens it took out one per call (`speculative.rs`).

use super::model::WebModel;
use super::speculative::Step;
use crate::api::ContextPolicy;
use crate::error::{Error, Result};
use crate::generate::{common_prefix, FinishReason, GenerateOptions, GenerateStats, Generation};
use crate::sampler::TokenLogprobs;
use crate::session::Saved;
use crate::speculate::SpecOptions;
use crate::tokenizer::{ChatTemplate, Message, Tokenizer};

/// A loaded model, its tokenizer, and the generation in progress.
pub struct WebSession {
    pub model: WebModel,
    pub tokenizer: Tokenizer,
    pub template: Option<ChatTemplate>,
    eos: Vec<u32>,
    /// Tokens whose K/V the cache holds, in order.
    cached: Vec<u32>,
    active: Option<Active>,
    last_stats: Option<GenerateStats>,
    /// Whether the running or last generation speculated.
    speculated: bool,
    /// The context policy of requests that set none (load option `contextOverflow`).
    pub context_overflow: ContextPolicy,
    /// Speculative decoding of requests that set none (load option `speculative`).
    pub speculative: Option<SpecOptions>,
    /// The pooling of embeddings that ask for none: the model's (a GGUF's
    /// `pooling_type`, a package's manifest), else the last token's.
    pub pooling: Option<crate::embed::Pooling>,
    /// Hex SHA-256 identity of the loaded model (`crate::session::model_fingerprint`).
    pub model_id: String,
    /// The conversation the cache holds: the last chat request's messages and its reply
    /// (empty after a plain generation); a snapshot's `meta` (`snapshot.rs`).
    pub messages: Vec<Message>,
    /// The tokenizer's vocabulary hash, computed at the first snapshot.
    pub(super) tokenizer_id: Option<String>,
    /// The snapshots last saved or restored (id, what its file holds; the newest last,
    /// at most `snapshot::TRACKED`): the next save of one appends only what changed.
    pub(super) snapshots: Vec<(String, Saved)>,
    /// Whether plain sampling draws on the GPU, pipelined (the default), or on the host
    /// step by step (a test hook: the same seed's tokens both ways).
    pub gpu_draws: bool,
}

struct Active {
    gen: Generation,
    /// What the next call takes its token from.
    step: Step,
}

/// One generated token and its text.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Piece {
    pub text: String,
    pub token: u32,
    pub done: bool,
    /// Why the generation ended (with `done`).
    pub finish: Option<&'static str>,
    /// The token's log-probabilities, when the sampler's config asks for them.
    #[serde(skip)]
    pub logprobs: Option<TokenLogprobs>,
    /// The end of `text` that was held back (an incomplete character, flushed at the end).
    #[serde(skip)]
    pub held: String,
}

fn finish_name(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Eos => "eos",
        FinishReason::MaxTokens => "max_tokens",
        FinishReason::ContextFull => "context_full",
        FinishReason::Stopped => "stopped",
    }
}

impl WebSession {
    pub fn new(
        model: WebModel,
        tokenizer: Tokenizer,
        template: Option<ChatTemplate>,
        model_id: String,
    ) -> Self {
        let mut eos = model.config().eos_token_ids.clone();
        eos.extend_from_slice(tokenizer.eos_ids());
        WebSession {
            model,
            tokenizer,
            template,
            eos,
            cached: Vec::new(),
            active: None,
            last_stats: None,
            speculated: false,
            context_overflow: ContextPolicy::Error,
            speculative: None,
            pooling: None,
            model_id,
            messages: Vec::new(),
            tokenizer_id: None,
            snapshots: Vec::new(),
            gpu_draws: true,
        }
    }

    /// Start generating after `tokens` (the whole sequence the model sees): runs the
    /// prompt (its cached prefix skipped) and chooses the first token.
    pub async fn begin(&mut self, tokens: &[u32], opts: &GenerateOptions) -> Result<()> {
        self.active = None;
        let context = self.model.context();
        let tokens = opts.window(tokens, context);
        let reused = Generation::check(&tokens, opts, context, &self.cached)?;
        let mut gen = Generation::new(opts, &self.eos, context, tokens.len(), reused)?;
        self.speculated = gen.speculates();
        gen.sampler().observe(&tokens);
        self.cached.truncate(reused);
        let (&last, head) = tokens.split_last().expect("checked non-empty");
        if head.len() > reused {
            self.model
                .feed_all(&head[reused..], self.cached.len())
                .await?;
            self.cached.extend_from_slice(&head[reused..]);
        }
        // Until the step succeeds the cache does not hold `last`.
        let step = Step::run(
            &mut self.model,
            &mut self.cached,
            &mut gen,
            last,
            self.gpu_draws,
        );
        let step = step.await?;
        self.active = Some(Active { gen, step });
        Ok(())
    }

    /// The next token and its text; `None` when no generation is running.
    pub async fn next(&mut self) -> Result<Option<Piece>> {
        let Some(active) = &mut self.active else {
            return Ok(None);
        };
        if let Step::Feed(fed) = active.step {
            let (model, cached) = (&mut self.model, &mut self.cached);
            active.step = Step::run(model, cached, &mut active.gen, fed, self.gpu_draws).await?;
        }
        let (token, drafted) = match &mut active.step {
            Step::Chosen(token) => (*token, false),
            Step::Verifying(v) => v.choose(&mut active.gen, self.model.config().vocab_size)?,
            Step::Feed(_) => unreachable!("run above"),
        };
        let mut text = active
            .gen
            .accept(&self.tokenizer, token, self.cached.len())?;
        // A drafted token that is taken, with more to come: its row (written by the
        // verification step) stays, and the next call takes the next row. Otherwise the
        // verification ends here: the rows after the last kept one go.
        let kept = drafted && active.gen.finished().is_none();
        if kept {
            if let Step::Verifying(v) = &mut active.step {
                v.keep(token, &mut self.cached);
            }
        } else if let Step::Verifying(v) = std::mem::replace(&mut active.step, Step::Feed(token)) {
            v.end(&mut active.gen, &mut self.model, self.cached.len());
        }
        if let Some(shift) = active.gen.shift(&self.cached) {
            // A sliding window's context shift: the cache keeps its first tokens and runs
            // the newest again; `token` is fed by the next call.
            self.cached.truncate(shift.keep);
            self.model.feed_all(&shift.refill, shift.keep).await?;
            self.cached.extend_from_slice(&shift.refill);
        }
        let finish = active.gen.finished();
        let logprobs = match finish {
            Some(FinishReason::Eos) => None,
            _ => active.gen.sampler().take_logprobs(),
        };
        let mut held = String::new();
        match finish {
            None if kept => {}
            None => active.step = Step::Feed(token),
            Some(_) => {
                held = active.gen.flush();
                text.push_str(&held);
                self.last_stats = Some(active.gen.stats());
                self.active = None;
            }
        }
        Ok(Some(Piece {
            text,
            token,
            done: finish.is_some(),
            finish: finish.map(finish_name),
            logprobs,
            held,
        }))
    }

    /// The tokens the KV cache holds, in order (kept across a reload).
    pub fn history(&self) -> &[u32] {
        &self.cached
    }

    /// Make the KV cache hold `history`, running only what it does not hold already
    /// (its cached prefix is kept): a reload after a lost device (a fresh model, the
    /// conversation goes on without its prompt processed again), or a snapshot restored
    /// by a prefill of its tokens.
    pub async fn refill(&mut self, history: &[u32]) -> Result<()> {
        self.active = None;
        let keep = common_prefix(&self.cached, history);
        self.cached.truncate(keep);
        if history.len() > keep {
            self.model.feed_all(&history[keep..], keep).await?;
        }
        self.cached = history.to_vec();
        Ok(())
    }

    /// Make the KV cache hold `history` from rows a snapshot kept (`runs`: start,
    /// count, bytes, in order from position 0): nothing runs through the model.
    pub(super) fn write_history<R: AsRef<[u8]>>(
        &mut self,
        history: &[u32],
        runs: impl Iterator<Item = (usize, usize, R)>,
    ) -> Result<()> {
        self.active = None;
        self.cached.clear();
        for (start, count, rows) in runs {
            self.model.write_kv(start, count, rows.as_ref())?;
        }
        self.cached = history.to_vec();
        Ok(())
    }

    /// End the running generation (the cache keeps what was processed).
    pub fn stop(&mut self) {
        if let Some(mut active) = self.active.take() {
            if let Step::Verifying(v) = active.step {
                // Stopped between a verification step's tokens: its taken drafts count.
                v.end(&mut active.gen, &mut self.model, self.cached.len());
            }
            active.gen.stop();
            self.last_stats = Some(active.gen.stats());
        }
    }

    /// Whether the running generation, else the last one, speculated (its stats'
    /// `speculation` counts its drafts).
    pub fn speculated(&self) -> bool {
        self.speculated
    }

    /// Stats of the running generation, else of the last one.
    pub fn stats(&self) -> Option<GenerateStats> {
        match &self.active {
            Some(a) => Some(a.gen.stats()),
            None => self.last_stats.clone(),
        }
    }

    /// The chat template, or an error naming its absence.
    pub fn template(&self) -> Result<&ChatTemplate> {
        self.template.as_ref().ok_or_else(|| {
            Error::ChatTemplate("the model has no chat template; use generate()".into())
        })
    }
}
