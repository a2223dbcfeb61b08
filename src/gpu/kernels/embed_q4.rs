//! Embedding gather: one row (the step's token) of a Q4 g64 matrix, dequantized to f32.

use super::{Dispatch, KernelPipeline, Slot, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/embed_q4.wgsl");

/// The step token that makes the gather read its token on the GPU (`prev`).
pub const TOKEN_ON_GPU: u32 = u32::MAX;

pub struct EmbedQ4 {
    kernel: KernelPipeline,
    pub k: usize,
}

impl EmbedQ4 {
    /// The gather of a `vocab` × `k` table.
    pub fn new(ctx: &GpuContext, vocab: usize, k: usize) -> Result<EmbedQ4> {
        if k == 0 || !k.is_multiple_of(64) || vocab == 0 || vocab > u32::MAX as usize - 1 {
            return Err(Error::InvalidArgument(format!(
                "embedding {vocab} × {k}: the width must be a positive multiple of 64, the \
                 vocabulary positive"
            )));
        }
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::Read,
        ];
        Ok(EmbedQ4 {
            kernel: KernelPipeline::new(
                ctx,
                "embed_q4",
                &[STEP_WGSL, WGSL].concat(),
                &slots,
                &[("K", k as f64), ("VOCAB", vocab as f64)],
            ),
            k,
        })
    }

    /// `step` is the [`crate::gpu::StepUniform`] buffer (its token selects the row; the
    /// caller checks it against the vocabulary), or with [`TOKEN_ON_GPU`] as its token
    /// the first u32 of `prev` does (the previous step's argmax); `out` holds k floats.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        step: &wgpu::Buffer,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
        out: &wgpu::Buffer,
        prev: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel
            .dispatch(ctx, &[step, codes, qparams, out, prev], 1)
    }
}
