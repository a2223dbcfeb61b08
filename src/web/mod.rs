//! The browser build (wasm32 + WebGPU or the CPU backend): a model streams from the
//! network or Cache Storage straight into GPU buffers or wasm memory ([`loader`], on the
//! backend [`backend`] chooses), and generates with awaited steps ([`session`]), which
//! also drive OpenAI-style requests (`completion`, on the crate's `api` module; `embeddings`) and save
//! and restore session snapshots (`snapshot`, on the crate's `session` module). [`api`]
//! is what wasm-bindgen exports; the npm package's JavaScript (`web/`) wraps it into
//! `Pocket.load`, `chat.completions.create`, async iterators, `AbortSignal`s and a Worker.

pub mod api;
mod backend;
mod cache;
mod completion;
mod device;
mod embeddings;
mod errors;
mod fetch;
mod gguf;
mod hub;
mod kept;
mod load;
mod loader;
mod locator;
mod model;
mod options;
mod session;
mod snapshot;
mod speculative;
mod tune;

/// `initThreadPool(n)` in the threaded build: starts `n` Web Workers sharing the module's
/// memory as rayon's global pool (call once, from a Worker, before loading a model).
#[cfg(feature = "wasm-threads")]
pub use wasm_bindgen_rayon::init_thread_pool;
