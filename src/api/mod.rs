//! The OpenAI protocol: `/v1/chat/completions` and `/v1/completions` requests, responses
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
//!
//! ```no_run
//! use pocketrt::api::{ChatCompletionRequest, Run};
//! # fn demo(session: &mut pocketrt::generate::Session) -> Result<(), pocketrt::api::ApiError> {
//! let req = ChatCompletionRequest::from_json(r#"{
//!     "messages": [{"role": "system", "content": "Be brief."},
//!                  {"role": "user", "content": "Name a color."}],
//!     "temperature": 0.7, "seed": 1, "stop": ["\n\n"], "max_tokens": 64,
//!     "chat_template_kwargs": {"enable_thinking": false}
//! }"#)?;
//! let reply = session.chat_completion(&req, |chunk| {
//!     if let Some(text) = &chunk.choices.first().and_then(|c| c.delta.content.clone()) {
//!         print!("{text}");
//!     }
//!     true
//! })?;
//! println!("\n{:?} after {} tokens", reply.choices[0].finish_reason, reply.usage.completion_tokens);
//! # Ok(()) }
//! ```

mod chat;
mod completion;
mod context;
mod error;
mod ids;
mod messages;
mod output;
mod parse;
mod reasoning;
mod response;
mod run;
mod scan;
mod session;
mod stop;
mod tools;
mod types;
mod validate;

pub use chat::ChatRun;
pub use completion::CompletionRun;
pub use error::{ApiError, ErrorBody};
pub use response::*;
pub use run::{usage, Run, RunCore, DEFAULT_MODEL};
pub use types::*;
pub use validate::DEFAULT_TEMPERATURE;
