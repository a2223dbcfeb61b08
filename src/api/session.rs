//! Requests run natively on a [`Session`]: the blocking driver of [`ChatRun`] and
//! [`CompletionRun`] (the browser drives the same runs with awaited steps).

use super::chat::ChatRun;
use super::completion::CompletionRun;
use super::error::ApiError;
use super::response::{ChatCompletion, ChatCompletionChunk, Completion};
use super::run::Run;
use super::types::{ChatCompletionRequest, CompletionRequest};
use crate::generate::{GenerateStats, Session};

impl Session {
    /// Answer a chat-completions request. The conversation comes whole in each request
    /// (the KV cache reuses what an earlier request left: see `usage.prompt_tokens_details.
    /// cached_tokens`); `on_chunk` receives the stream's chunks as they are decided
    /// (return false to stop: the response then ends there). Returns the whole response.
    pub fn chat_completion(
        &mut self,
        req: &ChatCompletionRequest,
        on_chunk: impl FnMut(&ChatCompletionChunk) -> bool,
    ) -> Result<ChatCompletion, ApiError> {
        let template = self.template().ok_or_else(|| {
            ApiError::unsupported(
                "messages",
                "the model has no chat template: use completions",
            )
        })?;
        let run = ChatRun::new(req, self.tokenizer(), template, self.engine().context())?;
        Ok(self.drive(run, on_chunk)?.0)
    }

    /// Answer a `/v1/completions` request (plain text continued), like
    /// [`Session::chat_completion`].
    pub fn completion(
        &mut self,
        req: &CompletionRequest,
        on_chunk: impl FnMut(&Completion) -> bool,
    ) -> Result<Completion, ApiError> {
        let run = CompletionRun::new(req, self.tokenizer(), self.engine().context())?;
        Ok(self.drive(run, on_chunk)?.0)
    }

    /// Run `run` to its end, streaming its chunks; the response and the generation's
    /// counts and timings.
    pub fn drive<R: Run>(
        &mut self,
        mut run: R,
        mut on_chunk: impl FnMut(&R::Chunk) -> bool,
    ) -> Result<(R::Response, GenerateStats), ApiError> {
        let mut go = run.first_chunk().is_none_or(|c| on_chunk(&c));
        let (prompt, opts) = (run.prompt().to_vec(), run.options().clone());
        let (_, stats) = self.generate_tokens(&prompt, &opts, |tokenizer, token| {
            if let Some(c) = run.push(tokenizer, token.text, token.logprobs) {
                go = go && on_chunk(&c);
            }
            go && !run.should_stop()
        })?;
        let (chunks, response) = run.finish(&stats);
        for c in &chunks {
            if !go || !on_chunk(c) {
                break;
            }
        }
        Ok((response, stats))
    }
}
