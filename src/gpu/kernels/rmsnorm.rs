//! RMSNorm of one vector: `out = x / sqrt(mean(x²) + eps) · weight`.

use super::common::wgsl::REDUCE64_WGSL;
use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/rmsnorm.wgsl");

pub struct RmsNorm {
    kernel: KernelPipeline,
    pub k: usize,
}

impl RmsNorm {
    pub fn new(ctx: &GpuContext, k: usize, eps: f32) -> RmsNorm {
        let source = [REDUCE64_WGSL, WGSL].concat();
        let constants = [("K", k as f64), ("EPS", f64::from(eps))];
        let slots = [Slot::Read, Slot::Read, Slot::ReadWrite];
        RmsNorm {
            kernel: KernelPipeline::new(ctx, "rmsnorm", &source, &slots, &constants),
            k,
        }
    }

    /// `x`, `weight` and `out`: k floats each (`out` distinct from `x`).
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        x: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(ctx, &[x, weight, out], 1)
    }
}
