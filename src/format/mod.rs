//! Model file formats: GGUF (llama.cpp), HF safetensors + config.json, and the pocket package.

mod fingerprint;
pub mod gguf;
pub mod gguf_dequant;
mod gguf_header;
pub mod gguf_source;
pub mod gguf_stream;
mod gguf_types;
pub mod gguf_write;
mod open;
pub mod package;
pub mod package_source;
pub mod pooling;
pub mod safetensors;
pub mod source;

pub use fingerprint::model_fingerprint;
pub use open::open;
pub use pooling::Pooling;
pub use source::{ModelSource, SourceTensor};
