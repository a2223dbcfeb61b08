//! `ln Σ exp` over the logits on the GPU (shaders/logsumexp.wgsl): the normaliser of the
//! sampler's log-probabilities, read back with the top-k so that no step reads the
//! whole vocabulary.

use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/logsumexp.wgsl");

pub struct LogSumExp {
    kernel: KernelPipeline,
    pub n: usize,
}

impl LogSumExp {
    pub fn new(ctx: &GpuContext, n: usize) -> LogSumExp {
        let slots = [Slot::Read, Slot::ReadWrite];
        LogSumExp {
            kernel: KernelPipeline::new(ctx, "logsumexp", WGSL, &slots, &[("N", n as f64)]),
            n,
        }
    }

    /// Bytes of the result: ln Σ exp (f32), then the largest logit (f32).
    pub fn result_bytes() -> u64 {
        8
    }

    /// One workgroup over `logits` into `result`.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        logits: &wgpu::Buffer,
        result: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(ctx, &[logits, result], 1)
    }
}
