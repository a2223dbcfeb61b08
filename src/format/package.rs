//! Pocket package: `manifest.json` + shards `weights-00000.bin`… (≤ 32 MiB each) forming one
//! logical byte stream; every tensor part starts 256-byte aligned in that stream.
//!
//! Writer: `PackageWriter`. Reader: `Manifest::read(dir)` / `from_json`, and the streaming
//! `ShardReader` — fed arbitrary byte chunks of one shard (as `fetch()` delivers them), it
//! emits `(tensor, part, offset, bytes)` and checks the shard's length and sha256 at the end.

use crate::config::ModelConfig;
use crate::error::Result;
use serde::{Deserialize, Serialize};

pub const FORMAT: &str = "pocketrt/1";
pub const SHARD_MAX: u64 = 32 << 20;
pub const ALIGN: u64 = 256;

/// Stored element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    /// Q4 g64: parts `codes` then `qparams` (see `quant`).
    Q4g64,
}

/// One contiguous part of a tensor in the logical stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// "data" for f32/f16; "codes" / "qparams" for q4g64.
    pub name: String,
    pub offset: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    pub file: String,
    pub bytes: u64,
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub config: ModelConfig,
    /// File name of an HF tokenizer.json inside the package.
    pub tokenizer: Option<String>,
    pub chat_template: Option<String>,
    pub tensors: Vec<TensorEntry>,
    pub shards: Vec<ShardEntry>,
}

impl Manifest {
    pub fn from_json(text: &str) -> Result<Manifest> {
        let _ = text;
        todo!()
    }
}
