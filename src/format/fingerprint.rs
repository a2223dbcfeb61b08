//! A model's identity as a hash: what a session snapshot records of the model it was
//! written from (`crate::session`), and what the engine keeps of the model it loaded.

use super::source::ModelSource;
use sha2::{Digest, Sha256};

/// Hex SHA-256 of a model: its container, config, tensor list (names, shapes, types,
/// sizes) and the source's own identity bytes ([`ModelSource::identity`]: a package's
/// shard hashes, a synthetic model's seed). Cheap: no weight is read.
pub fn model_fingerprint(src: &dyn ModelSource) -> String {
    let mut h = Sha256::new();
    h.update(src.container().as_bytes());
    h.update(serde_json::to_vec(src.config()).expect("a config serializes"));
    for t in src.tensors() {
        h.update(t.name.as_bytes());
        h.update(format!("{:?}{}{}", t.shape, t.dtype, t.bytes).as_bytes());
    }
    h.update(src.identity());
    format!("{:x}", h.finalize())
}
