//! Text generation on an [`Engine`]: a [`Session`] owns the engine, the tokenizer and
//! the chat history, streams text as it is produced, stops at end-of-sequence or the
//! token limit, and keeps its KV cache between calls. A new request whose tokens start
//! with what the cache already holds processes only the rest; one that diverges rolls
//! the cache back to the common prefix.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::sampler::{Sampler, SamplerConfig};
use crate::tokenizer::{ChatOptions, ChatTemplate, Message, StreamDecoder, Tokenizer};
use web_time::Instant;

/// What a generation may do.
#[derive(Clone, Copy, Debug)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions {
            max_tokens: 256,
            sampler: SamplerConfig::greedy(),
        }
    }
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

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
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
        }
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

    /// Tokens the KV cache holds.
    pub fn cached_tokens(&self) -> usize {
        self.cached.len()
    }

    /// The chat so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
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
        let mut sampler = Sampler::new(opts.sampler)?;
        if opts.max_tokens == 0 {
            return Err(Error::InvalidArgument(
                "max_tokens must be at least 1".into(),
            ));
        }
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        let context = self.engine.context();
        if tokens.len() > context {
            return Err(Error::ContextTooLong {
                position: tokens.len(),
                context,
            });
        }
        let t_start = Instant::now();
        // Keep the common prefix; at least the last token is processed (for its logits).
        let reused = common_prefix(&self.cached, tokens).min(tokens.len() - 1);
        self.engine.rewind(reused);
        self.cached.truncate(reused);
        let (&last, head) = tokens.split_last().expect("non-empty");
        for &t in &head[reused..] {
            self.engine.feed(t)?;
            self.cached.push(t);
        }
        let mut next = self.engine.step_sampled(last, &mut sampler)?;
        self.cached.push(last);
        let t_first = Instant::now();

        let mut stream = StreamDecoder::new(true);
        let mut text = String::new();
        let mut generated = 0;
        let finish = loop {
            if self.eos.contains(&next) {
                break FinishReason::Eos;
            }
            generated += 1;
            let piece = stream.push(&self.tokenizer, next)?;
            text.push_str(&piece);
            if !piece.is_empty() && !on_text(&piece) {
                break FinishReason::Stopped;
            }
            if generated >= opts.max_tokens {
                break FinishReason::MaxTokens;
            }
            if self.engine.position() >= context {
                break FinishReason::ContextFull;
            }
            let fed = next;
            next = self.engine.step_sampled(fed, &mut sampler)?;
            self.cached.push(fed);
        };
        let rest = stream.flush();
        if !rest.is_empty() {
            on_text(&rest);
            text.push_str(&rest);
        }
        let stats = GenerateStats {
            prompt_tokens: tokens.len(),
            reused_tokens: reused,
            prompt_seconds: (t_first - t_start).as_secs_f64(),
            generated_tokens: generated,
            generate_seconds: t_first.elapsed().as_secs_f64(),
            finish,
        };
        Ok((text, stats))
    }
}

#[cfg(test)]
mod tests;
