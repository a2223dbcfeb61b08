//! OpenAI-style requests in the browser: the crate's [`crate::api`] runs ([`ChatRun`],
//! [`CompletionRun`]) driven by the session's awaited steps, one chunk per call so that
//! JavaScript can stream and abort between them (`web/src/completions.js` builds
//! `chat.completions.create` on it). Chunks and responses cross as JSON text, the same
//! bytes the native runtime would send. A chat request's messages and its reply become
//! the session's conversation (what a snapshot saves).

use super::errors::Failure;
use super::session::WebSession;
use crate::api::{
    ApiError, AssistantMessage, ChatCompletionRequest, ChatMessage, ChatRun, CompletionRequest,
    CompletionRun, Content, Run,
};
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

impl Completion {
    /// Check and start a request (`request`: its JSON text) on `session`: renders, fits
    /// and runs the prompt (its cached prefix skipped) and chooses the first token.
    pub async fn begin(
        session: &mut WebSession,
        request: &str,
        endpoint: Endpoint,
    ) -> std::result::Result<Completion, Failure> {
        let context = session.model.context();
        let (run, chat): (Box<dyn JsonRun>, _) = match endpoint {
            Endpoint::Chat => {
                let mut req = ChatCompletionRequest::from_json(request)?;
                req.params
                    .context_overflow
                    .get_or_insert(session.context_overflow);
                let template = session.template().map_err(ApiError::from)?;
                let mut run = ChatRun::new(&req, &session.tokenizer, template, context)?;
                run.apply_speculation(session.speculative);
                let messages = req.messages.iter().map(chat_message).collect();
                (Box::new(run), Some(messages))
            }
            Endpoint::Text => {
                let mut req = CompletionRequest::from_json(request)?;
                req.params
                    .context_overflow
                    .get_or_insert(session.context_overflow);
                let mut run = CompletionRun::new(&req, &session.tokenizer, context)?;
                run.apply_speculation(session.speculative);
                (Box::new(run), None)
            }
        };
        let (prompt, options) = (run.prompt().to_vec(), run.options().clone());
        session.begin(&prompt, &options).await?;
        Ok(Completion {
            pending: run.first_chunk().into_iter().collect(),
            run,
            response: None,
            chat,
        })
    }

    /// The next chunk's JSON, generated on `session`; `None` once the request is
    /// answered.
    pub async fn next(&mut self, session: &mut WebSession) -> Result<Option<String>> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Ok(Some(chunk));
            }
            if self.response.is_some() {
                return Ok(None);
            }
            let piece = match session.next().await? {
                Some(p) => p,
                None => {
                    self.end(session);
                    if self.response.is_none() {
                        return Ok(None); // nothing ran: no stats to end with
                    }
                    continue;
                }
            };
            // As natively: the token's own text (none for end of sequence), then what was
            // held back, flushed without logprobs.
            let own = &piece.text[..piece.text.len() - piece.held.len()];
            if piece.finish != Some("eos") {
                if let Some(chunk) = self.run.push(&session.tokenizer, own, piece.logprobs) {
                    self.pending.push_back(chunk);
                }
            }
            if !piece.held.is_empty() {
                if let Some(chunk) = self.run.push(&session.tokenizer, &piece.held, None) {
                    self.pending.push_back(chunk);
                }
            }
            let stop = self.run.should_stop();
            if stop && !piece.done {
                session.stop(); // a stop string: the generation ends here
            }
            if piece.done || stop {
                self.end(session);
            }
        }
    }

    /// The generation ended: queue the last chunks, keep the response, and make the
    /// session's conversation a chat's messages and its reply.
    fn end(&mut self, session: &mut WebSession) {
        if let (None, Some(stats)) = (&self.response, session.stats()) {
            let (chunks, response) = self.run.finish(&stats);
            self.pending.extend(chunks);
            let mut messages = self.chat.take().unwrap_or_default();
            if !messages.is_empty() {
                messages.extend(reply_message(&response));
            }
            session.messages = messages;
            self.response = Some(response);
        }
    }

    /// The whole response's JSON (once the generation ended).
    pub fn result(&self) -> Option<&str> {
        self.response.as_deref()
    }
}

/// A request's message as the chat template saw it (the request was checked by
/// `ChatRun::new`; its conversion there, `api::messages`, is private to `api`).
pub fn chat_message(m: &ChatMessage) -> Message {
    let content = match &m.content {
        Some(Content::Text(t)) => t.clone(),
        Some(Content::Parts(parts)) => {
            let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
            texts.join("\n")
        }
        None => String::new(),
    };
    let tool_calls = m.tool_calls.as_ref().map(|calls| {
        let calls = calls.iter().map(|c| {
            let mut call = serde_json::json!({
                "type": c.kind.as_deref().unwrap_or("function"),
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            });
            if let Some(id) = &c.id {
                call["id"] = id.clone().into();
            }
            call
        });
        serde_json::Value::Array(calls.collect())
    });
    Message {
        role: m.role.template_name().into(),
        content,
        reasoning_content: m.reasoning_content.clone(),
        tool_calls,
        name: m.name.clone(),
        tool_call_id: m.tool_call_id.clone(),
    }
}

/// The reply of a chat response (its JSON text) as a message.
pub fn reply_message(response: &str) -> Option<Message> {
    #[derive(serde::Deserialize)]
    struct Response {
        choices: Vec<Choice>,
    }
    #[derive(serde::Deserialize)]
    struct Choice {
        message: AssistantMessage,
    }
    let r: Response = serde_json::from_str(response).ok()?;
    let m = r.choices.into_iter().next()?.message;
    Some(Message {
        role: m.role,
        content: m.content.unwrap_or_default(),
        reasoning_content: m.reasoning_content,
        tool_calls: m.tool_calls.and_then(|c| serde_json::to_value(c).ok()),
        name: None,
        tool_call_id: None,
    })
}
