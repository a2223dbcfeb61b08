//! `ln Σ exp` over the logits on the GPU (shaders/logsumexp.wgsl): the normaliser of the
//! sampler's log-probabilities, read back with the top-k so that no step reads the
//! whole vocabulary. One workgroup, like the argmax.

use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/logsumexp.wgsl");

pub struct LogSumExp(KernelPipeline);

impl LogSumExp {
    /// The kernel over `n` logits.
    pub fn new(ctx: &GpuContext, n: usize) -> LogSumExp {
        let slots = [Slot::Read, Slot::ReadWrite];
        let n = [("N", n as f64)];
        LogSumExp(KernelPipeline::new(ctx, "logsumexp", WGSL, &slots, &n))
    }

    /// Bytes of the result: ln Σ exp (f32), then the largest logit (f32).
    pub fn result_bytes() -> u64 {
        8
    }

    /// `logits` into `result` ([`LogSumExp::result_bytes`]).
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        logits: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        self.0.dispatch(ctx, &[logits, out], 1)
    }
}
