//! pocketrt: small language models on the GPU in a browser tab (wasm + WebGPU) and natively.
//!
//! The crate is organised by concern (docs/ARCHITECTURE.md has the whole map):
//! [`format`] reads and writes model files, [`quant`] holds the Q4 g64 weight format,
//! [`config`] the model description, [`tokenizer`] text ↔ ids, [`cpu`] the reference forward
//! pass, and [`convert`] turns GGUF / HF models into pocket packages. [`generate`] runs a
//! model in a [`generate::Session`]; [`api`] speaks OpenAI's chat-completions protocol on it.
//!
//! A chat completion, streamed (the request is OpenAI's JSON, with `reasoning_content`,
//! tool calls and the usual sampling extensions):
//!
//! ```no_run
//! use pocketrt::api::ChatCompletionRequest;
//! use pocketrt::{cpu::WeightMode, engine::{Backend, Engine}, format, generate::Session};
//! use pocketrt::tokenizer::{ChatTemplate, Tokenizer};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut src = format::open("Qwen3-0.6B.gguf".as_ref())?;
//! let tokenizer = Tokenizer::from_hf_json(&src.tokenizer_json()?.expect("a tokenizer"))?;
//! let template = src.chat_template().map(|t| ChatTemplate::new(&t)).transpose()?;
//! let engine = Engine::load(src.as_mut(), Backend::Auto, WeightMode::Q4, 4096)?;
//! let mut session = Session::new(engine, tokenizer, template);
//!
//! let req = ChatCompletionRequest::from_json(r#"{
//!     "messages": [{"role": "system", "content": "Be brief."},
//!                  {"role": "user", "content": "Name a color."}],
//!     "temperature": 0.7, "seed": 1, "stop": ["\n\n"], "max_tokens": 64,
//!     "chat_template_kwargs": {"enable_thinking": false}
//! }"#)?;
//! let reply = session.chat_completion(&req, |chunk| {
//!     let delta = &chunk.choices.first().map(|c| &c.delta);
//!     print!("{}", delta.and_then(|d| d.content.as_deref()).unwrap_or(""));
//!     true // false would stop the generation
//! })?;
//! let usage = &reply.usage;
//! println!("\n{:?}: {} tokens, {} of the prompt's from the cache",
//!          reply.choices[0].finish_reason, usage.completion_tokens,
//!          usage.prompt_tokens_details.cached_tokens);
//! # Ok(()) }
//! ```

pub mod api;
pub mod config;
pub mod constrain;
pub mod convert;
pub mod cpu;
pub mod embed;
pub mod engine;
pub mod error;
pub mod format;
pub mod generate;
pub mod gpu;
pub mod hub;
#[cfg(not(target_arch = "wasm32"))]
pub mod kept;
pub mod prune;
pub mod quant;
pub mod sampler;
#[cfg(not(target_arch = "wasm32"))]
pub mod server;
pub mod session;
pub mod speculate;
pub mod synth;
pub mod tokenizer;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use config::{Arch, ModelConfig};
pub use error::{Error, Result};
