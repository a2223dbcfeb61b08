//! Causal flash attention for prefill, the wrapper its designs share
//! ([`AttentionPrefill`]): a chunk of queries against the f16 KV cache (GQA, online
//! softmax), one kernel whose source is the design's: key tiles staged in workgroup
//! memory on GPUs (`attention_prefill`), and on CPU adapters 8 queries per workgroup
//! reading each key straight from the cache in step (`soft::attention_prefill_lanes`).
//! `gpu::forward::designs` builds it in the design the variant names.

use super::rope_kv::{HeadShape, KvBuffers};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::{Dispatch, KernelPipeline, Slot};

/// Queries per workgroup of the key-tiles design.
pub const QUERY_TILE: usize = 64;
/// Queries per workgroup of the lanes design.
pub const LANES_QUERIES: usize = 8;

/// Which kernel design computes prefill attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionPrefillVariant {
    /// Key tiles in workgroup memory: the design for real GPUs.
    KeyTiles,
    /// 8 queries per workgroup walking the keys in step, no barriers: CPU adapters.
    Lanes,
}

impl AttentionPrefillVariant {
    /// Its name in profiles and pipeline labels.
    pub fn name(self) -> &'static str {
        match self {
            AttentionPrefillVariant::KeyTiles => "key_tiles",
            AttentionPrefillVariant::Lanes => "lanes",
        }
    }

    /// Queries per workgroup.
    fn queries(self) -> usize {
        match self {
            AttentionPrefillVariant::KeyTiles => QUERY_TILE,
            AttentionPrefillVariant::Lanes => LANES_QUERIES,
        }
    }
}
pub struct AttentionPrefill {
    kernel: KernelPipeline,
    pub shape: HeadShape,
    pub variant: AttentionPrefillVariant,
}

impl AttentionPrefill {
    /// The kernel of `variant` for `shape` from its `source` and override values
    /// `constants` (`gpu::forward::designs` checks the shape and writes the source).
    pub(crate) fn build(
        ctx: &GpuContext,
        variant: AttentionPrefillVariant,
        shape: HeadShape,
        source: &str,
        constants: &[(&str, f64)],
    ) -> AttentionPrefill {
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        AttentionPrefill {
            kernel: KernelPipeline::new(
                ctx,
                &format!("attention_prefill/{}", variant.name()),
                source,
                &slots,
                constants,
            ),
            shape,
            variant,
        }
    }

    /// The grid for `tokens` queries: query tiles along x, q heads (KV heads for the lanes
    /// design) along y.
    pub fn grid(&self, tokens: usize) -> [u32; 3] {
        let heads = match self.variant {
            AttentionPrefillVariant::KeyTiles => self.shape.n_heads,
            AttentionPrefillVariant::Lanes => self.shape.n_kv_heads,
        };
        [
            tokens.div_ceil(self.variant.queries()).max(1) as u32,
            heads as u32,
            1,
        ]
    }

    /// `q`: roped queries (tokens × q_dim); caches holding positions
    /// `0..chunk.start + chunk.count`; `out`: tokens × q_dim.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        chunk: &wgpu::Buffer,
        q: &wgpu::Buffer,
        cache: KvBuffers<'_>,
        out: &wgpu::Buffer,
        max_tokens: usize,
    ) -> Dispatch {
        let grid = self.grid(max_tokens);
        let mut d =
            self.kernel
                .dispatch(ctx, &[chunk, q, cache.k, cache.v, out], grid[0] * grid[1]);
        d.grid = grid;
        d
    }
}
