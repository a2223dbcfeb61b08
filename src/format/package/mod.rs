//! Pocket package: `manifest.json` + shards `weights-00000.bin`… (≤ 32 MiB each) forming one
//! logical byte stream; every tensor part starts 256-byte aligned in that stream (the gaps
//! are zero padding), and a part may straddle two or more shards.
//!
//! - Writer: [`PackageWriter`] streams parts into shards, hashing each as it goes.
//! - Manifest: [`Manifest::read`] / [`Manifest::from_json`] parse and validate it.
//! - Streaming reader: [`ShardReader`] — fed arbitrary byte chunks of one shard (as
//!   `fetch()` delivers them), it emits [`Chunk`]s `(tensor, part, offset, bytes)` and
//!   checks the shard's length and sha256 at the end.
//! - From disk: [`PackageDir`] (shards verified once, tensors read on demand),
//!   [`read_package`] and [`load_tensor`].

use crate::config::ModelConfig;
use serde::{Deserialize, Serialize};

mod manifest;
mod reader;
mod writer;

pub use reader::{load_tensor, read_package, Chunk, PackageDir, ShardReader};
pub use writer::PackageWriter;

pub const FORMAT: &str = "pocketrt/1";
pub const SHARD_MAX: u64 = 32 << 20;
pub const ALIGN: u64 = 256;
/// File name of the manifest inside a package.
pub const MANIFEST_FILE: &str = "manifest.json";
/// File name the writer gives the tokenizer.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// File name of shard `index`: `weights-00000.bin`, `weights-00001.bin`, …
pub fn shard_file_name(index: usize) -> String {
    format!("weights-{index:05}.bin")
}

/// Stored element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    /// Q4 g64: parts `codes` then `qparams` (see `quant`).
    Q4g64,
    /// Q8 g32: parts `codes` then `scales` (see `quant::Q8Tensor`).
    Q8g32,
}

/// One contiguous part of a tensor in the logical stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// "data" for f32/f16; "codes" / "qparams" for q4g64; "codes" / "scales" for q8g32.
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
    /// The pooling of embeddings the source declared (absent: it said nothing; older
    /// packages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<crate::format::pooling::Pooling>,
    pub tensors: Vec<TensorEntry>,
    pub shards: Vec<ShardEntry>,
}

impl TensorEntry {
    /// The part called `name` ("data", "codes", "qparams").
    pub fn part(&self, name: &str) -> Option<&Part> {
        self.parts.iter().find(|p| p.name == name)
    }

    /// Total stored bytes over all parts.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }
}

/// Lower-case hex of a digest.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
