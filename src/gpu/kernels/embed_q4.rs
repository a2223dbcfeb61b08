//! Embedding gather: one row (the step's token) of a Q4 g64 matrix, dequantized to f32.

use super::{Dispatch, KernelPipeline, Slot, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/embed_q4.wgsl");

pub struct EmbedQ4 {
    kernel: KernelPipeline,
    pub k: usize,
}

impl EmbedQ4 {
    pub fn new(ctx: &GpuContext, k: usize) -> Result<EmbedQ4> {
        if k == 0 || k % 64 != 0 {
            return Err(Error::InvalidArgument(format!(
                "embedding width {k} is not a positive multiple of 64"
            )));
        }
        let slots = [Slot::Uniform, Slot::Read, Slot::Read, Slot::ReadWrite];
        Ok(EmbedQ4 {
            kernel: KernelPipeline::new(
                ctx,
                "embed_q4",
                &[STEP_WGSL, WGSL].concat(),
                &slots,
                &[("K", k as f64)],
            ),
            k,
        })
    }

    /// `step` is the [`crate::gpu::StepUniform`] buffer (its token selects the row; the
    /// caller checks it against the vocabulary); `out` holds k floats.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        step: &wgpu::Buffer,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(ctx, &[step, codes, qparams, out], 1)
    }
}
