//! pocketrt: small language models on the GPU in a browser tab (wasm + WebGPU) and natively.
//!
//! The crate is organised by concern (docs/ARCHITECTURE.md has the whole map):
//! [`format`] reads and writes model files, [`quant`] holds the Q4 g64 weight format,
//! [`config`] the model description, [`tokenizer`] text ↔ ids, [`cpu`] the reference forward
//! pass, and [`convert`] turns GGUF / HF models into pocket packages.

pub mod api;
pub mod config;
pub mod convert;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod format;
pub mod generate;
pub mod gpu;
pub mod hub;
pub mod prune;
pub mod quant;
pub mod sampler;
pub mod synth;
pub mod tokenizer;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use config::{Arch, ModelConfig};
pub use error::{Error, Result};
