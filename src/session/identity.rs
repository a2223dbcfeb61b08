//! What a snapshot belongs to: hashes of the model (`crate::format::model_fingerprint`)
//! and of the tokenizer's vocabulary.

use crate::tokenizer::Tokenizer;
use sha2::{Digest, Sha256};

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
    format!("{:x}", h.finalize())
}
