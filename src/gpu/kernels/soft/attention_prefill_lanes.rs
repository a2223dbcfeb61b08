//! Prefill attention for CPU adapters (shaders/soft/attention_prefill_lanes.wgsl), where
//! workgroup-memory loads and barriers are slow: a workgroup of 8 queries (one SIMD batch)
//! per KV head, each invocation holding the state of its query's whole GQA group and
//! reading each key straight from the cache, in step with the others.
//! `common::attention_prefill::AttentionPrefill` is the wrapper.

use super::lanes_state::{state_wgsl, Queries, LANES_COMMON_WGSL};
use crate::gpu::kernels::common::rope_kv::HeadShape;
use crate::gpu::kernels::common::wgsl::{CHUNK_WGSL, KV_VEC4_WGSL};

const WGSL: &str = include_str!("../../../../shaders/soft/attention_prefill_lanes.wgsl");

/// The kernel's source for `shape` (head_dim a multiple of 4).
pub(crate) fn source(shape: HeadShape) -> String {
    let group = shape.n_heads / shape.n_kv_heads;
    let state = state_wgsl(group, shape.head_dim / 4, Queries::Roped);
    [CHUNK_WGSL, KV_VEC4_WGSL, LANES_COMMON_WGSL, &state, WGSL].concat()
}
