//! Where the tests find the real test data (fetched by scripts/fetch-test-models; the
//! paths come from environment variables that scripts/test sets). Missing data fails the
//! test with the command that fetches it — real-data tests never skip.

pub mod greedy;
pub mod q8_0;

use std::path::PathBuf;

/// The real Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF.
pub fn coder_gguf() -> PathBuf {
    PathBuf::from(std::env::var_os("POCKETRT_CODER_GGUF").unwrap_or_else(|| {
        panic!(
            "POCKETRT_CODER_GGUF is not set: run \
             `export POCKETRT_CODER_GGUF=$(scripts/fetch-test-models qwen-coder)` (scripts/test does)"
        )
    }))
}
