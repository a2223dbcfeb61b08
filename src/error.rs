//! One error type for the whole crate. Variants are named for what the user did or has;
//! messages say what is wrong and, where there is one, what to do about it.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{what}: not a {expected} file (magic {found:?})")]
    BadMagic {
        what: String,
        expected: &'static str,
        found: Vec<u8>,
    },

    #[error(
        "{what}: the file is truncated: needs {needed} bytes, has {available} (re-download it)"
    )]
    ModelTruncated {
        what: String,
        needed: u64,
        available: u64,
    },

    #[error("{what}: corrupt model file: {detail}")]
    CorruptModel { what: String, detail: String },

    #[error("{what}: unsupported {kind} {name} (supported: {supported})")]
    Unsupported {
        what: String,
        kind: &'static str,
        name: String,
        supported: &'static str,
    },

    #[error("{what}: missing {field}")]
    MissingField { what: String, field: String },

    #[error("model has no tensor {0}")]
    MissingTensor(String),

    #[error("tensor {tensor}: shape {found:?}, expected {expected:?}")]
    ShapeMismatch {
        tensor: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },

    #[error("shard {shard}: sha256 {found} does not match the manifest's {expected} (corrupt download or cache)")]
    ShardHashMismatch {
        shard: String,
        expected: String,
        found: String,
    },

    #[error("shard {shard}: {found} bytes, the manifest says {expected}")]
    ShardSizeMismatch {
        shard: String,
        expected: u64,
        found: u64,
    },

    #[error("manifest: {0}")]
    Manifest(String),

    #[error("tokenizer: {0}")]
    Tokenizer(String),

    #[error("chat template: {0}")]
    ChatTemplate(String),

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    #[error("no GPU adapter found ({detail}); on Linux install a Vulkan driver (`apt-get install mesa-vulkan-drivers` gives the llvmpipe CPU adapter), or run with `--backend cpu`")]
    NoGpuAdapter { detail: String },

    #[error("GPU device request failed: {0}")]
    GpuDevice(String),

    #[error("{what} needs {limit} = {needed}, the GPU adapter allows at most {available} (use a smaller model or context, or `--backend cpu`)")]
    ExceedsDeviceLimits {
        what: String,
        limit: &'static str,
        needed: u64,
        available: u64,
    },

    #[error("context full: position {position} is past the context length {context} (start a new session or load with a longer context)")]
    ContextTooLong { position: usize, context: usize },

    #[error("GPU error: {0}")]
    Gpu(String),

    #[error("the model at context {context} needs {needed} bytes of GPU memory, over the budget of {budget} (use a smaller --context, or raise the budget with --memory-budget-mb)")]
    OverMemoryBudget {
        context: usize,
        needed: u64,
        budget: u64,
    },

    #[error("model hub: {0}")]
    Hub(String),

    #[error("{url}: {detail}")]
    Fetch { url: String, detail: String },

    #[error("aborted")]
    Aborted,

    #[error(
        "the GPU device was lost ({0}); reload the model to go on (the browser: model.reload())"
    )]
    GpuLost(String),

    #[error("storage quota: the model needs {needed} more bytes in Cache Storage, the browser allows {available} more (free space or delete cached models, Pocket.cache.delete; or load with overQuota: \"uncached\" or cache: false)")]
    Quota { needed: u64, available: u64 },

    #[error("{url}: not in the cache, and offline: true forbids requests")]
    NotCached { url: String },

    #[error("WebGPU is not available in this browser ({0}); use a browser with WebGPU (Safari 26, Chrome 113+)")]
    NoWebGpu(String),

    /// A session snapshot that belongs to another model, tokenizer, format version or a
    /// context too short for it (`src/session/`).
    #[error("session snapshot {what}: {detail}")]
    SessionMismatch { what: String, detail: String },

    /// A session snapshot that is truncated or whose checksum fails.
    #[error("session snapshot {what}: corrupt: {detail}")]
    SessionCorrupt { what: String, detail: String },
}

impl Error {
    /// Attach a path to an I/O error.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::CorruptModel {
            what: what.into(),
            detail: detail.into(),
        }
    }

    pub fn missing(what: impl Into<String>, field: impl Into<String>) -> Self {
        Error::MissingField {
            what: what.into(),
            field: field.into(),
        }
    }
}
