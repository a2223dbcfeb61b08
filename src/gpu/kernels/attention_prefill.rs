//! Causal flash attention for prefill: a chunk of queries against the f16 KV cache (GQA,
//! online softmax). Two designs behind one wrapper, as the device profile says: key tiles
//! staged in workgroup memory on GPUs (shaders/attention_prefill.wgsl), and on CPU
//! adapters 8 queries per workgroup reading each key straight from the cache in step
//! (`soft::attention_prefill_lanes`).

use super::gemm_q4::CHUNK_WGSL;
use super::rope_kv::{HeadShape, KvBuffers};
use super::soft::attention_prefill_lanes;
use super::{Dispatch, KernelPipeline, Slot};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention_prefill.wgsl");

/// Queries per workgroup of the key-tiles design.
pub const QUERY_TILE: usize = 64;

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
            AttentionPrefillVariant::Lanes => attention_prefill_lanes::QUERIES,
        }
    }
}
/// Floats of one K (or V) tile in workgroup memory (2 × 8 KiB: the default 16 KiB).
const TILE_FLOATS: usize = 2048;

pub struct AttentionPrefill {
    kernel: KernelPipeline,
    pub shape: HeadShape,
    pub variant: AttentionPrefillVariant,
}

impl AttentionPrefill {
    /// Prefill attention for `shape` in the profile's variant.
    pub fn new(ctx: &GpuContext, shape: HeadShape) -> Result<AttentionPrefill> {
        Self::with_variant(ctx, ctx.profile.prefill_attention, shape)
    }

    /// Prefill attention for `shape` in `variant` (any variant runs on any adapter).
    pub fn with_variant(
        ctx: &GpuContext,
        variant: AttentionPrefillVariant,
        shape: HeadShape,
    ) -> Result<AttentionPrefill> {
        shape.check()?;
        if !shape.head_dim.is_multiple_of(4) {
            return Err(Error::InvalidArgument(format!(
                "prefill attention needs a head_dim that is a multiple of 4, not {}",
                shape.head_dim
            )));
        }
        let mut constants = shape.constants();
        let source = match variant {
            AttentionPrefillVariant::KeyTiles => {
                // Key positions per tile: as many as fit, at most 64.
                let bkv = (TILE_FLOATS / shape.head_dim).min(64);
                constants.push(("BKV", bkv as f64));
                [CHUNK_WGSL, WGSL].concat()
            }
            AttentionPrefillVariant::Lanes => attention_prefill_lanes::source(shape),
        };
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        Ok(AttentionPrefill {
            kernel: KernelPipeline::new(
                ctx,
                &format!("attention_prefill/{}", variant.name()),
                &source,
                &slots,
                &constants,
            ),
            shape,
            variant,
        })
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
