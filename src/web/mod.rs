//! The browser build (wasm32 + WebGPU): a model streams from the network or Cache Storage
//! straight into GPU buffers ([`loader`]), and generates with awaited GPU steps
//! ([`session`]). [`api`] is what wasm-bindgen exports; the npm package's JavaScript
//! (`web/`) wraps it into `Pocket.load`, async iterators, `AbortSignal`s and a Worker.

pub mod api;
mod errors;
mod fetch;
mod gguf;
mod hub;
mod loader;
mod session;
