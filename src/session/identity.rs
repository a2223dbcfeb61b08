//! What a snapshot belongs to: hashes of the model and of the tokenizer's vocabulary.

use crate::format::ModelSource;
use crate::tokenizer::Tokenizer;
use sha2::{Digest, Sha256};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

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
    hex(&h.finalize())
}

/// Hex SHA-256 of a tokenizer's vocabulary (every id's token text and whether it is
/// special): what the ids of a saved history mean.
pub fn tokenizer_fingerprint(tokenizer: &Tokenizer) -> String {
    let mut h = Sha256::new();
    for id in 0..tokenizer.vocab_size() as u32 {
        let token = tokenizer.id_to_token(id).unwrap_or("");
        h.update((token.len() as u32).to_le_bytes());
        h.update(token.as_bytes());
        h.update([tokenizer.is_special(id) as u8]);
    }
    hex(&h.finalize())
}
