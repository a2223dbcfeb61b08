//! Decode attention: one query token against the KV cache (GQA, softmax).

use super::rope_kv::{HeadShape, KvBuffers};
use super::{Dispatch, KernelPipeline, Slot, REDUCE64_WGSL, STEP_WGSL};
use crate::error::Result;
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention.wgsl");

pub struct Attention {
    kernel: KernelPipeline,
    pub shape: HeadShape,
}

impl Attention {
    pub fn new(ctx: &GpuContext, shape: HeadShape) -> Result<Attention> {
        shape.check()?;
        let source = [STEP_WGSL, REDUCE64_WGSL, WGSL].concat();
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::ReadWrite,
        ];
        Ok(Attention {
            kernel: KernelPipeline::new(ctx, "attention", &source, &slots, &shape.constants()),
            shape,
        })
    }

    /// Bytes of the scores scratch buffer: `n_heads · context` f32.
    pub fn scratch_bytes(&self) -> u64 {
        (self.shape.n_heads * self.shape.context * 4) as u64
    }

    /// `q`: roped q (n_heads · head_dim); caches as written by [`super::rope_kv::RopeKv`];
    /// `scores`: [`Attention::scratch_bytes`]; `out`: n_heads · head_dim floats.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        step: &wgpu::Buffer,
        q: &wgpu::Buffer,
        cache: KvBuffers<'_>,
        scores: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(
            ctx,
            &[step, q, cache.k, cache.v, scores, out],
            self.shape.n_heads as u32,
        )
    }
}
