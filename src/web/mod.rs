//! The browser build (wasm32 + WebGPU or the CPU backend): a model streams from the
//! network or Cache Storage straight into GPU buffers or wasm memory ([`loader`], on the
//! backend [`backend`] chooses), and generates with awaited steps ([`session`]). [`api`] is what wasm-bindgen exports; the npm package's JavaScript
//! (`web/`) wraps it into `Pocket.load`, async iterators, `AbortSignal`s and a Worker.

pub mod api;
mod backend;
mod errors;
mod fetch;
mod gguf;
mod hub;
mod loader;
mod model;
mod session;
