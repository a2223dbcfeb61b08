//! The OpenAI protocol: `/v1/chat/completions`, `/v1/completions` and `/v1/embeddings`
//! (`embeddings.rs`) requests, responses
//! and stream chunks in OpenAI's shapes (with `reasoning_content` and the local
//! runtimes' sampling extensions), run on a model. One module for every front end: the
//! native [`Session::chat_completion`](crate::generate::Session::chat_completion), the
//! browser package and Worker (which drive [`ChatRun`] with awaited steps) and a server.
//!
//! A run does not step the model itself: [`ChatRun::new`] checks the request, renders
//! the conversation in the model's chat template and fits it to the context; the driver
//! generates [`Run::prompt`] with [`Run::options`], hands each token's text to
//! [`Run::push`] and streams the chunks it returns, stops on [`Run::should_stop`], and
//! ends with [`Run::finish`]. In between, the text goes through stop strings
//! (`stop.rs`), the `<think>` split (`reasoning.rs`) and tool-call parsing (`tools.rs`).
//! A request may switch speculative decoding (`speculative.rs`); the front end resolves
//! that against its own default with [`RunCore::apply_speculation`] (through
//! [`ChatRun::apply_speculation`] / [`CompletionRun::apply_speculation`]) before it
//! generates. Responses carry llama-server's `timings` (drafts included).
//!
//! The crate docs have an example ([`crate`]).

mod chat;
mod completion;
mod context;
mod embeddings;
mod error;
mod format;
mod ids;
mod messages;
mod output;
mod parse;
mod reasoning;
mod response;
mod run;
mod scan;
mod session;
mod speculative;
mod stop;
mod tools;
mod types;
mod validate;

pub use chat::ChatRun;
pub use completion::CompletionRun;
pub use embeddings::{
    base64_f32, input_error as embedding_input_error, EmbeddingData, EmbeddingInput,
    EmbeddingRequest, EmbeddingResponse, EmbeddingUsage, EmbeddingVector, EncodingFormat,
};
pub use error::{ApiError, ErrorBody, GPU_LOST};
pub use format::grammar;
pub use response::*;
pub use run::{usage, Run, RunCore, DEFAULT_MODEL};
pub use types::*;
pub use validate::DEFAULT_TEMPERATURE;
