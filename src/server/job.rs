//! What the routes hand the model thread, and what it answers: a [`Job`] carries one
//! checked [`Request`] (a generation, embeddings, a slot API action) with its route, its
//! deadline and the channel its [`Msg`]s come back on.

use super::slots::SlotRequest;
use crate::api::{ApiError, ChatCompletionRequest, CompletionRequest, EmbeddingRequest};
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

/// A request for the model thread.
pub(super) enum Request {
    Chat(ChatCompletionRequest),
    Completion(CompletionRequest),
    Embeddings(EmbeddingRequest),
    Slot(SlotRequest),
}

/// What the model thread says about a job.
pub(super) enum Msg {
    /// The request is valid; chunks (if streamed) and the response follow.
    Started,
    /// A stream chunk's JSON.
    Chunk(String),
    /// The whole response's JSON: the job is done.
    Done(String),
    Failed(ApiError),
}

pub(super) struct Job {
    pub request: Request,
    pub route: &'static str,
    pub reply: UnboundedSender<Msg>,
    pub received: Instant,
    pub deadline: Instant,
}
