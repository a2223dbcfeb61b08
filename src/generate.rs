//! Text generation on an [`Engine`]: a [`Session`] owns the engine, the tokenizer and
//! the chat history, streams text as it is produced, stops at end-of-sequence or the
//! token limit, and keeps its KV cache between calls. A new request whose tokens start
//! with what the cache already holds processes only the rest; one that diverges rolls
//! the cache back to the common prefix.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::sampler::{SamplerConfig, TokenLogprobs};
use crate::speculate::{DraftModel, SpecOptions, SpecStats};
use crate::tokenizer::{ChatOptions, ChatTemplate, Message, Tokenizer};
use std::borrow::Cow;

pub use generation::Generation;

/// What a generation may do.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
    /// What to do with a request longer than the context.
    pub overflow: ContextOverflow,
    /// The grammar the output must match (compiled, in its start state), if any.
    pub constraint: Option<crate::constrain::Constraint>,
    /// Speculative decoding: which drafts to verify in each step (`None`: one token per
    /// step).
    pub speculative: Option<SpecOptions>,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions {
            max_tokens: 256,
            sampler: SamplerConfig::greedy(),
            overflow: ContextOverflow::Error,
            constraint: None,
            speculative: None,
        }
    }
}

/// The policy for a sequence that does not fit the context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContextOverflow {
    /// Fail with [`Error::ContextTooLong`] (the default); a reply that fills the cache
    /// ends with [`FinishReason::ContextFull`].
    #[default]
    Error,
    /// A sliding window that always keeps the first `keep` tokens (a system prompt or
    /// an instruction; at most half the window). A prompt longer than the context keeps
    /// them and its newest tokens, `context - min(max_tokens, context / 2)` in all, so
    /// that the reply has room (at least half the context stays history). A reply that
    /// fills the cache drops the oldest half of the tokens after the first `keep` and runs
    /// the rest into the cache again (llama.cpp's "context shift", but re-computed, so
    /// the model sees exactly what a fresh request of the kept tokens would show it: no
    /// re-rotated keys), and goes on to `max_tokens`.
    SlidingWindow { keep: usize },
}

impl GenerateOptions {
    /// The part of `tokens` a `context`-position model processes under this policy: all
    /// of them when they fit (or under [`ContextOverflow::Error`], whose check then
    /// fails), else the sliding window's first `keep` and newest tokens.
    pub fn window<'a>(&self, tokens: &'a [u32], context: usize) -> Cow<'a, [u32]> {
        let ContextOverflow::SlidingWindow { keep } = self.overflow else {
            return Cow::Borrowed(tokens);
        };
        if tokens.len() <= context {
            return Cow::Borrowed(tokens);
        }
        let total = context - self.max_tokens.min(context / 2);
        let front = keep.min(total / 2);
        let tail = &tokens[tokens.len() - (total - front)..];
        if front == 0 {
            return Cow::Borrowed(tail);
        }
        Cow::Owned([&tokens[..front], tail].concat())
    }
}

/// A context shift ([`Generation::shift`]): the cache keeps its first `keep` tokens and
/// runs `refill` after them; then the token that did not fit is fed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shift {
    pub keep: usize,
    pub refill: Vec<u32>,
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-sequence token.
    Eos,
    /// `max_tokens` were generated.
    MaxTokens,
    /// The KV cache is full.
    ContextFull,
    /// The text callback asked to stop.
    Stopped,
}

/// Counts and timings of one generation.
#[derive(Clone, Debug)]
pub struct GenerateStats {
    /// Tokens of the request (history included).
    pub prompt_tokens: usize,
    /// Of those, tokens whose K/V the cache already held (not processed again).
    pub reused_tokens: usize,
    pub prompt_seconds: f64,
    /// Tokens generated (end-of-sequence not counted).
    pub generated_tokens: usize,
    /// From the first generated token to the last.
    pub generate_seconds: f64,
    pub finish: FinishReason,
    /// Context shifts under [`ContextOverflow::SlidingWindow`] (each re-ran the kept
    /// tokens into the cache).
    pub context_shifts: usize,
    /// Speculative decoding's drafts and verification steps (zeros without it).
    pub speculation: SpecStats,
}

impl GenerateStats {
    /// Prompt tokens processed per second (reused ones not counted).
    pub fn prompt_tok_s(&self) -> f64 {
        (self.prompt_tokens - self.reused_tokens) as f64 / self.prompt_seconds.max(1e-9)
    }

    /// Generated tokens per second, after the first.
    pub fn generate_tok_s(&self) -> f64 {
        self.generated_tokens.saturating_sub(1) as f64 / self.generate_seconds.max(1e-9)
    }
}

/// One generated token as [`Session::generate_tokens`] hands it on.
#[derive(Clone, Debug)]
pub struct Token<'a> {
    /// Its text (empty while a character is incomplete).
    pub text: &'a str,
    /// Its log-probabilities, when the sampler's config asks for them.
    pub logprobs: Option<TokenLogprobs>,
}

/// A KV cache and the tokens it holds, out of its [`Session`] ([`Session::swap_slot`]).
pub struct SessionSlot {
    kv: crate::engine::KvSlot,
    cached: Vec<u32>,
}

impl SessionSlot {
    /// The tokens whose K/V it holds.
    pub fn cached(&self) -> &[u32] {
        &self.cached
    }
}

/// A conversation (or a run of completions) with one loaded model.
pub struct Session {
    engine: Engine,
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    eos: Vec<u32>,
    /// The tokens whose K/V the engine holds, in order (`engine.position()` of them).
    cached: Vec<u32>,
    messages: Vec<Message>,
    pub chat_options: ChatOptions,
    /// The pooling of embeddings that ask for none ([`Session::embed`]): the model's
    /// (`crate::embed::Pooling::of_model`), set by the front end that loaded it; `None`:
    /// the last token's.
    pub pooling: Option<crate::embed::Pooling>,
    /// The context policy of the last generation (a snapshot records it).
    pub(crate) overflow: ContextOverflow,
    /// The snapshot file this session last saved or restored, and what it holds.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) snapshot: Option<(std::path::PathBuf, crate::session::Saved)>,
    /// The draft model of speculative decoding, if one was given ([`Session::set_draft`]).
    draft: Option<DraftModel>,
}

/// Chat-template options for a reply: the generation prompt, and no thinking block
/// (models with a thinking switch answer directly).
pub fn reply_options() -> ChatOptions {
    ChatOptions {
        add_generation_prompt: true,
        enable_thinking: Some(false),
        ..Default::default()
    }
}

/// Asked before each plain step's token is fed (`Session::decode_plain`): whether to stop
/// there, given the generation, the cached tokens and the token.
type Interrupt<'a> = dyn FnMut(&mut Generation, &[u32], u32) -> Result<bool> + 'a;

pub(crate) fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Session {
    /// A session on `engine`. End-of-sequence ids are the config's and the tokenizer's.
    pub fn new(engine: Engine, tokenizer: Tokenizer, template: Option<ChatTemplate>) -> Session {
        let mut eos = engine.config().eos_token_ids.clone();
        eos.extend_from_slice(tokenizer.eos_ids());
        Session {
            engine,
            tokenizer,
            template,
            eos,
            cached: Vec::new(),
            messages: Vec::new(),
            chat_options: reply_options(),
            pooling: None,
            overflow: ContextOverflow::Error,
            #[cfg(not(target_arch = "wasm32"))]
            snapshot: None,
            draft: None,
        }
    }

    /// Give the session a draft model for speculative decoding (used by requests whose
    /// [`SpecOptions::draft_model`] is set); `None` takes it away.
    pub fn set_draft(&mut self, draft: Option<DraftModel>) {
        self.draft = draft;
    }

    /// The draft model, if any.
    pub fn draft(&self) -> Option<&DraftModel> {
        self.draft.as_ref()
    }

    /// Open the chat with a system message (kept by [`Session::reset_chat`]).
    pub fn set_system(&mut self, text: &str) {
        self.messages.retain(|m| m.role != "system");
        self.messages.insert(0, Message::system(text));
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The model's chat template, if it has one.
    pub fn template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// The tokens whose K/V the cache holds, in order.
    pub fn cached(&self) -> &[u32] {
        &self.cached
    }

    /// A second, empty conversation cache on the same weights ([`Engine::new_slot`]).
    pub fn new_slot(&self) -> Result<SessionSlot> {
        Ok(SessionSlot {
            kv: self.engine.new_slot()?,
            cached: Vec::new(),
        })
    }

    /// Exchange the KV cache (and the tokens it holds) with `slot`'s: a server keeps one
    /// slot per conversation and swaps the one a request continues in.
    pub fn swap_slot(&mut self, slot: &mut SessionSlot) -> Result<()> {
        self.engine.swap_slot(&mut slot.kv)?;
        std::mem::swap(&mut self.cached, &mut slot.cached);
        Ok(())
    }

    /// After [`Error::GpuLost`]: a new device with the weights of `src` again, its KV
    /// cache refilled with the tokens this session's held ([`Engine::reload`]), so that
    /// the conversation goes on where it stopped.
    pub fn reload(&mut self, src: &mut dyn crate::format::ModelSource) -> Result<()> {
        self.engine.reload(src, &self.cached)
    }

    /// Tokens the KV cache holds.
    pub fn cached_tokens(&self) -> usize {
        self.cached.len()
    }

    /// The chat so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Replace the chat (what a snapshot saves with the cache): a front end that drives
    /// requests itself ([`Session::drive`]) keeps its conversation here.
    pub fn set_messages(&mut self, messages: Vec<Message>) {
        self.messages = messages;
    }

    /// Keep only the first `keep` tokens of the cache (0: empty it; the memory stays).
    pub fn rewind(&mut self, keep: usize) {
        self.engine.rewind(keep);
        self.cached.truncate(keep);
    }

    /// Forget the chat but its system message (the cache is reused as far as the next
    /// request allows).
    pub fn reset_chat(&mut self) {
        self.messages.retain(|m| m.role == "system");
    }

    /// Continue `text` (encoded with the tokenizer's special tokens).
    pub fn complete(
        &mut self,
        text: &str,
        opts: &GenerateOptions,
        on_text: impl FnMut(&str) -> bool,
    ) -> Result<(String, GenerateStats)> {
        let tokens = self.tokenizer.encode(text, true);
        self.generate(&tokens, opts, on_text)
    }

    /// Add a user message, answer it in the model's chat template, and add the answer.
    /// Earlier turns stay in the cache: only the new tokens are processed.
    pub fn chat(
        &mut self,
        user: &str,
        opts: &GenerateOptions,
        on_text: impl FnMut(&str) -> bool,
    ) -> Result<(String, GenerateStats)> {
        let template = self.template.as_ref().ok_or_else(|| {
            Error::ChatTemplate("the model has no chat template; use plain completion".into())
        })?;
        let mut messages = self.messages.clone();
        messages.push(Message::user(user));
        let text = template.render(&messages, &self.chat_options)?;
        let tokens = self.tokenizer.encode(&text, true);
        let (reply, stats) = self.generate(&tokens, opts, on_text)?;
        messages.push(Message::assistant(reply.trim()));
        self.messages = messages;
        Ok((reply, stats))
    }

    /// Generate after `tokens` (the whole sequence the model sees, history included),
    /// streaming text to `on_text` (return false to stop). Returns the text and stats.
    pub fn generate(
        &mut self,
        tokens: &[u32],
        opts: &GenerateOptions,
        mut on_text: impl FnMut(&str) -> bool,
    ) -> Result<(String, GenerateStats)> {
        self.generate_tokens(tokens, opts, |_, t| t.text.is_empty() || on_text(t.text))
    }

    /// [`Session::generate`] handing `on_token` every generated token (end of sequence
    /// not counted) with its text and log-probabilities, and the tokenizer; the text held
    /// at the end (an incomplete character) comes as a last call without logprobs.
    pub fn generate_tokens(
        &mut self,
        tokens: &[u32],
        opts: &GenerateOptions,
        mut on_token: impl FnMut(&Tokenizer, Token<'_>) -> bool,
    ) -> Result<(String, GenerateStats)> {
        let context = self.engine.context();
        self.overflow = opts.overflow;
        let tokens = opts.window(tokens, context);
        let reused = Generation::check(&tokens, opts, context, &self.cached)?;
        let mut gen = Generation::new(opts, &self.eos, context, tokens.len(), reused)?;
        gen.sampler().observe(&tokens);
        let (&last, head) = tokens.split_last().expect("checked non-empty");
        self.keep_and_feed(reused, &head[reused..])?;
        let mut token = last;
        loop {
            token = self.decode(&mut gen, token, &mut on_token)?;
            match gen.shift(&self.cached) {
                Some(shift) => self.keep_and_feed(shift.keep, &shift.refill)?,
                None => break,
            }
        }
        let rest = gen.flush();
        if !rest.is_empty() {
            let token = Token {
                text: &rest,
                logprobs: None,
            };
            on_token(&self.tokenizer, token);
        }
        Ok(gen.into_result())
    }
}

impl Session {
    /// The engine, the tokens its cache holds and the chat, to change together (a
    /// snapshot's restore, `crate::session`).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn parts_mut(&mut self) -> (&mut Engine, &mut Vec<u32>, &mut Vec<Message>) {
        (&mut self.engine, &mut self.cached, &mut self.messages)
    }

    /// Keep the first `keep` cached tokens and run `tokens` after them.
    pub(crate) fn keep_and_feed(&mut self, keep: usize, tokens: &[u32]) -> Result<()> {
        self.engine.rewind(keep);
        self.cached.truncate(keep);
        self.engine.feed_all(tokens)?;
        self.cached.extend_from_slice(tokens);
        Ok(())
    }

    /// Run `first` (not yet in the cache) and the tokens it leads to until `gen` finishes;
    /// returns the last token taken, which the cache does not hold.
    fn decode(
        &mut self,
        gen: &mut Generation,
        first: u32,
        on_token: &mut impl FnMut(&Tokenizer, Token<'_>) -> bool,
    ) -> Result<u32> {
        if gen.speculates() {
            return self.decode_speculative(gen, first, on_token);
        }
        Ok(self
            .decode_plain(gen, first, on_token, &mut |_, _, _| Ok(false))?
            .0)
    }

    /// One token per step from `first` (not yet in the cache) until `gen` finishes, or
    /// until `interrupt(gen, cached, next)`, asked before each token `next` is fed, says
    /// to stop there (speculative decoding has drafts for what follows `next`). Returns
    /// the last token taken, which the cache does not hold, and whether it was
    /// interrupted.
    pub(super) fn decode_plain(
        &mut self,
        gen: &mut Generation,
        first: u32,
        on_token: &mut impl FnMut(&Tokenizer, Token<'_>) -> bool,
        interrupt: &mut Interrupt<'_>,
    ) -> Result<(u32, bool)> {
        let mut draws = self.engine.gpu_draws(gen.sampler());
        let mut interrupted = false;
        if gen.sampler().candidates_needed().is_none() || draws.is_some() {
            // Greedy, or sampled with the draws on the GPU: pipelined there (the next
            // step runs while a token is read).
            let (tokenizer, cached) = (&self.tokenizer, &mut self.cached);
            let (mut fed, mut taken) = (Some(first), first);
            let on_step = |next, position| {
                if let Some(first) = fed.take() {
                    cached.push(first);
                    gen.prompt_done();
                }
                taken = next;
                let go_on = Self::take_token(gen, tokenizer, on_token, next, position)?;
                if go_on && interrupt(gen, cached, next)? {
                    interrupted = true;
                    return Ok(false);
                }
                if go_on {
                    cached.push(next);
                }
                Ok(go_on)
            };
            match &mut draws {
                Some(d) => self.engine.sampled_from(first, d, on_step)?,
                None => self.engine.greedy_from(first, on_step)?,
            }
            if let Some(d) = draws {
                // The sampler's generator goes on after the GPU's draws (a context shift
                // decodes again with it).
                gen.sampler().resume_after(d);
            }
            return Ok((taken, interrupted));
        }
        let mut next = self.engine.step_sampled(first, gen.sampler())?;
        self.cached.push(first);
        gen.prompt_done();
        while Self::take_token(gen, &self.tokenizer, on_token, next, self.engine.position())? {
            if interrupt(gen, &self.cached, next)? {
                return Ok((next, true));
            }
            let fed = next;
            next = self.engine.step_sampled(fed, gen.sampler())?;
            self.cached.push(fed);
        }
        Ok((next, false))
    }

    /// Stream `next` (made by the step that left `position` tokens in the cache) and say
    /// whether generation goes on (then `next` is fed).
    fn take_token(
        gen: &mut Generation,
        tokenizer: &Tokenizer,
        on_token: &mut impl FnMut(&Tokenizer, Token<'_>) -> bool,
        next: u32,
        position: usize,
    ) -> Result<bool> {
        let piece = gen.accept(tokenizer, next, position)?;
        if gen.finished() != Some(FinishReason::Eos) {
            let logprobs = gen.sampler().take_logprobs();
            let token = Token {
                text: &piece,
                logprobs,
            };
            if !on_token(tokenizer, token) {
                gen.stop();
            }
        }
        Ok(gen.finished().is_none())
    }
}

mod embed;
mod generation;
mod speculative;
#[cfg(test)]
mod tests;
