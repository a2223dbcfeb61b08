//! Plain-Rust forward pass: the oracle every GPU kernel is judged against, and the CPU
//! fallback backend.
//!
//! f32 arithmetic throughout, one token per step with a KV cache, for qwen3 (per-head
//! q/k RMSNorm), qwen2 (q/k/v bias) and llama. Weight matrices are f32 or Q4 g64 (a row
//! is dequantized on the fly inside the matvec, so the Q4 numbers go through the same
//! code). Matvecs run on rayon natively, sequentially on wasm.
//!
//! ```
//! # fn main() -> pocketrt::Result<()> {
//! use pocketrt::cpu::{MemorySource, Model, WeightMode};
//! let config = pocketrt::ModelConfig::from_hf_json(
//!     r#"{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
//!         "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
//!         "intermediate_size": 128, "vocab_size": 100}"#,
//! )?;
//! let mut src = MemorySource::random(config, 7, 0.1)?;
//! let model = Model::load(&mut src, WeightMode::F32)?;
//! let mut cache = model.new_cache(64)?;
//! let logits = model.forward(1, &mut cache)?; // position 0
//! assert_eq!((logits.len(), cache.len()), (100, 1));
//! let continuation = model.greedy(&[1, 2, 3], 16)?;
//! assert_eq!(continuation.len(), 16);
//! # Ok(()) }
//! ```
//!
//! Proven against HF transformers on tiny random models (`tests/oracle_fixtures.rs`) and
//! llama.cpp on Qwen2.5-Coder-0.5B (`tests/oracle_real.rs`).

pub mod fast;
mod generate;
mod memory_source;
mod model;
pub mod ops;
mod weights;

#[cfg(test)]
mod tests;

pub use memory_source::MemorySource;
pub use model::{KvCache, Model};
pub use weights::{LayerWeights, ModelWeights, Weight, WeightMode};
