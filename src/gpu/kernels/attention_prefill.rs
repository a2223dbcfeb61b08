//! Causal flash attention for prefill: a chunk of queries against the f16 KV cache (GQA,
//! online softmax over key tiles in workgroup memory).

use super::gemm_q4::CHUNK_WGSL;
use super::rope_kv::{HeadShape, KvBuffers};
use super::{Dispatch, KernelPipeline, Slot};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention_prefill.wgsl");

/// Queries per workgroup.
pub const QUERY_TILE: usize = 64;
/// Floats of one K (or V) tile in workgroup memory (2 × 8 KiB: the default 16 KiB).
const TILE_FLOATS: usize = 2048;

pub struct AttentionPrefill {
    kernel: KernelPipeline,
    pub shape: HeadShape,
}

impl AttentionPrefill {
    pub fn new(ctx: &GpuContext, shape: HeadShape) -> Result<AttentionPrefill> {
        shape.check()?;
        if shape.head_dim % 4 != 0 {
            return Err(Error::InvalidArgument(format!(
                "prefill attention needs a head_dim that is a multiple of 4, not {}",
                shape.head_dim
            )));
        }
        // Key positions per tile: as many as fit, at most 64.
        let bkv = (TILE_FLOATS / shape.head_dim).min(64);
        let mut constants = shape.constants();
        constants.push(("BKV", bkv as f64));
        let source = [CHUNK_WGSL, WGSL].concat();
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        Ok(AttentionPrefill {
            kernel: KernelPipeline::new(ctx, "attention_prefill", &source, &slots, &constants),
            shape,
        })
    }

    /// The grid for `tokens` queries: query tiles along x, q heads along y.
    pub fn grid(&self, tokens: usize) -> [u32; 3] {
        [
            tokens.div_ceil(QUERY_TILE).max(1) as u32,
            self.shape.n_heads as u32,
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
