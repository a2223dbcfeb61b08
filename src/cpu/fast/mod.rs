//! The fast CPU backend: decode on Q4 g64 weights with SIMD kernels and threads.
//!
//! Matrix inputs are prepared per block of 64 ([`Acts`]) in one of two precisions
//! ([`Precision`]): `Int8` quantizes them with one f32 scale per block, so each weight
//! group costs two byte-multiply instructions instead of 64 float FMAs (the scheme of
//! llama.cpp's Q4_1 × Q8_1); `F32` keeps the oracle's numbers exactly. The kernel
//! ([`Kernel`]) is picked at run time: AVX2+FMA+F16C on x86-64 (with AVX-VNNI or AVX-512
//! VNNI dot products where the CPU has them), NEON on aarch64, simd128
//! on wasm when compiled with it, portable Rust elsewhere. Matrix rows are split across
//! the threads of a spinning pool natively (`pool.rs`), and of rayon in the threaded wasm
//! build (feature `wasm-threads`: a pool of Web Workers sharing the module's memory,
//! started by `initThreadPool`); the plain wasm build runs everything on one thread.
//!
//! The plain oracle (`cpu::Model`) is the reference this backend is tested against: in
//! f32 it differs only in summation order; in int8 by the activation rounding
//! (`|x − d·q| ≤ d/2` per element), whose effect on a dot product the tests bound exactly.
//!
//! ```
//! # fn main() -> pocketrt::Result<()> {
//! use pocketrt::cpu::fast::{FastModel, Precision};
//! use pocketrt::cpu::MemorySource;
//! let config = pocketrt::ModelConfig::from_hf_json(
//!     r#"{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
//!         "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
//!         "intermediate_size": 128, "vocab_size": 100}"#,
//! )?;
//! let model = FastModel::load(&mut MemorySource::random(config, 7, 0.1)?, Precision::Int8)?;
//! let mut cache = model.new_cache(16)?;
//! let logits = model.forward(1, &mut cache)?;
//! assert_eq!((logits.len(), cache.len()), (100, 1));
//! # Ok(()) }
//! ```

mod acts;
mod gemm;
mod gemv;
mod kernel;
mod memory;
mod model;
mod packed;
#[cfg(not(target_arch = "wasm32"))]
mod pool;
mod stream;

pub use acts::{element_of, Acts, Precision};
pub use gemm::{gemm, gemm_swiglu};
pub use gemv::{gemv, gemv_swiglu, rows_per_task, threads};
pub use kernel::{time_kernels, KernelTiming};
pub use kernel::{Kernel, Rows, TILE};
pub use model::{FastModel, Logits, PREFILL_CHUNK};
pub use packed::{Format, Packed};
pub use stream::StreamedTensors;
