//! OpenAI-style requests in the browser: the crate's [`crate::api`] runs ([`ChatRun`],
//! [`CompletionRun`]) driven by the session's awaited steps, one chunk per call so that
//! JavaScript can stream and abort between them (`web/src/completions.js` builds
//! `chat.completions.create` on it). Chunks and responses cross as JSON text, the same
//! bytes the native runtime would send.

use super::session::WebSession;
use super::snapshot::{chat_message, reply_message};
use crate::api::{ApiError, ChatCompletionRequest, ChatRun, CompletionRequest, CompletionRun, Run};
use crate::error::Result;
use crate::generate::GenerateStats;
use crate::sampler::TokenLogprobs;
use crate::tokenizer::{Message, Tokenizer};
use serde::Serialize;
use std::collections::VecDeque;

/// Which endpoint a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Text,
}

impl Endpoint {
    /// `"chat"` or `"text"` (the JS side's names).
    pub fn parse(kind: &str) -> std::result::Result<Endpoint, ApiError> {
        match kind {
            "chat" => Ok(Endpoint::Chat),
            "text" => Ok(Endpoint::Text),
            other => Err(ApiError::malformed(format!(
                "unknown endpoint {other:?} (chat or text)"
            ))),
        }
    }
}

/// A run with its chunk and response types erased to JSON text.
trait JsonRun {
    fn prompt(&self) -> &[u32];
    fn options(&self) -> &crate::generate::GenerateOptions;
    fn should_stop(&self) -> bool;
    fn first_chunk(&self) -> Option<String>;
    fn push(&mut self, tok: &Tokenizer, text: &str, lp: Option<TokenLogprobs>) -> Option<String>;
    fn finish(&mut self, stats: &GenerateStats) -> (Vec<String>, String);
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("API objects serialize")
}

impl<R: Run> JsonRun for R
where
    R::Chunk: Serialize,
    R::Response: Serialize,
{
    fn prompt(&self) -> &[u32] {
        Run::prompt(self)
    }
    fn options(&self) -> &crate::generate::GenerateOptions {
        Run::options(self)
    }
    fn should_stop(&self) -> bool {
        Run::should_stop(self)
    }
    fn first_chunk(&self) -> Option<String> {
        Run::first_chunk(self).map(|c| json(&c))
    }
    fn push(&mut self, tok: &Tokenizer, text: &str, lp: Option<TokenLogprobs>) -> Option<String> {
        Run::push(self, tok, text, lp).map(|c| json(&c))
    }
    fn finish(&mut self, stats: &GenerateStats) -> (Vec<String>, String) {
        let (chunks, response) = Run::finish(self, stats);
        (chunks.iter().map(json).collect(), json(&response))
    }
}

/// The request being answered: its run, the chunks decided and not yet taken, and the
/// response once the generation ended.
pub struct Completion {
    run: Box<dyn JsonRun>,
    pending: VecDeque<String>,
    response: Option<String>,
    /// A chat request's messages: with the reply, the session's conversation once it
    /// is answered (`None`: a text completion, after which there is none).
    chat: Option<Vec<Message>>,
}

/// Why a request failed: its own fault (OpenAI's shape) or the engine's.
pub enum Failure {
    Api(ApiError),
    Engine(crate::Error),
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        Failure::Api(e)
    }
}

impl From<crate::Error> for Failure {
    fn from(e: crate::Error) -> Failure {
        Failure::Engine(e)
    }
}

impl WebSession {
    /// Check and start a request (`request`: its JSON text): renders, fits and runs the
    /// prompt (its cached prefix skipped) and chooses the first token.
    pub async fn completion_begin(
        &mut self,
        request: &str,
        endpoint: Endpoint,
    ) -> std::result::Result<(), Failure> {
        self.completion = None;
        let context = self.model.context();
        let (run, chat): (Box<dyn JsonRun>, _) = match endpoint {
            Endpoint::Chat => {
                let mut req = ChatCompletionRequest::from_json(request)?;
                req.params
                    .context_overflow
                    .get_or_insert(self.context_overflow);
                let template = self.template().map_err(ApiError::from)?;
                let run = ChatRun::new(&req, &self.tokenizer, template, context)?;
                let messages = req.messages.iter().map(chat_message).collect();
                (Box::new(run), Some(messages))
            }
            Endpoint::Text => {
                let mut req = CompletionRequest::from_json(request)?;
                req.params
                    .context_overflow
                    .get_or_insert(self.context_overflow);
                let run = CompletionRun::new(&req, &self.tokenizer, context)?;
                (Box::new(run), None)
            }
        };
        let (prompt, options) = (run.prompt().to_vec(), run.options().clone());
        self.begin(&prompt, &options).await?;
        self.completion = Some(Completion {
            pending: run.first_chunk().into_iter().collect(),
            run,
            response: None,
            chat,
        });
        Ok(())
    }

    /// The next chunk's JSON; `None` once the request is answered (or none runs).
    pub async fn completion_next(&mut self) -> Result<Option<String>> {
        loop {
            let Some(c) = &mut self.completion else {
                return Ok(None);
            };
            if let Some(chunk) = c.pending.pop_front() {
                return Ok(Some(chunk));
            }
            if c.response.is_some() {
                return Ok(None);
            }
            let piece = match self.next().await? {
                Some(p) => p,
                None => {
                    self.completion_end();
                    if self
                        .completion
                        .as_ref()
                        .is_some_and(|c| c.response.is_none())
                    {
                        return Ok(None); // nothing ran: no stats to end with
                    }
                    continue;
                }
            };
            let c = self.completion.as_mut().expect("set above");
            // As natively: the token's own text (none for end of sequence), then what was
            // held back, flushed without logprobs.
            let own = &piece.text[..piece.text.len() - piece.held.len()];
            if piece.finish != Some("eos") {
                if let Some(chunk) = c.run.push(&self.tokenizer, own, piece.logprobs) {
                    c.pending.push_back(chunk);
                }
            }
            if !piece.held.is_empty() {
                if let Some(chunk) = c.run.push(&self.tokenizer, &piece.held, None) {
                    c.pending.push_back(chunk);
                }
            }
            let stop = c.run.should_stop();
            if stop && !piece.done {
                self.stop(); // a stop string: the generation ends here
            }
            if piece.done || stop {
                self.completion_end();
            }
        }
    }

    /// The generation ended: queue the last chunks, keep the response, and the
    /// conversation (a chat's messages and its reply).
    fn completion_end(&mut self) {
        let stats = self.stats();
        if let (Some(c), Some(stats)) = (&mut self.completion, stats) {
            if c.response.is_none() {
                let (chunks, response) = c.run.finish(&stats);
                c.pending.extend(chunks);
                let mut messages = c.chat.take().unwrap_or_default();
                if !messages.is_empty() {
                    messages.extend(reply_message(&response));
                }
                self.messages = messages;
                c.response = Some(response);
            }
        }
    }

    /// The whole response's JSON of the last request (once its chunks are taken).
    pub fn completion_result(&self) -> Option<&str> {
        self.completion.as_ref().and_then(|c| c.response.as_deref())
    }
}
