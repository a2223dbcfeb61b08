//! Model file formats: GGUF (llama.cpp), HF safetensors + config.json, and the pocket package.

pub mod gguf;
pub mod gguf_dequant;
pub mod gguf_source;
pub mod package;
pub mod safetensors;
pub mod source;

pub use source::{open, ModelSource, SourceTensor};
