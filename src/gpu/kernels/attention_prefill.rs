//! Causal flash attention for prefill on GPUs (shaders/attention_prefill.wgsl): a chunk
//! of queries against the f16 KV cache (GQA, online softmax), `common::attention_prefill::QUERY_TILE` queries per
//! workgroup, key tiles staged in workgroup memory. The wrapper its designs share is
//! `common::attention_prefill::AttentionPrefill`; the CPU adapters' design is
//! `soft::attention_prefill_lanes`.

use super::common::rope_kv::HeadShape;
use super::common::wgsl::CHUNK_WGSL;

const WGSL: &str = include_str!("../../../shaders/attention_prefill.wgsl");

/// Floats of one K (or V) tile in workgroup memory (2 × 8 KiB: the default 16 KiB).
const TILE_FLOATS: usize = 2048;

/// The key-tiles kernel's source for `shape` (head_dim a multiple of 4), its tile length
/// pushed onto `constants`.
pub(crate) fn key_tiles_source(shape: HeadShape, constants: &mut Vec<(&str, f64)>) -> String {
    // Key positions per tile: as many as fit, at most 64.
    let bkv = (TILE_FLOATS / shape.head_dim).min(64);
    constants.push(("BKV", bkv as f64));
    [CHUNK_WGSL, WGSL].concat()
}
