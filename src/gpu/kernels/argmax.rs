//! GPU argmax over the logits: the host reads back 4 bytes, not the vocabulary.

use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/argmax.wgsl");

pub struct Argmax {
    kernel: KernelPipeline,
    pub n: usize,
}

impl Argmax {
    pub fn new(ctx: &GpuContext, n: usize) -> Argmax {
        let slots = [Slot::Read, Slot::ReadWrite];
        Argmax {
            kernel: KernelPipeline::new(ctx, "argmax", WGSL, &slots, &[("N", n as f64)]),
            n,
        }
    }

    /// `result`: 2 u32 (index, value bits); the index is what decode reads back.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        logits: &wgpu::Buffer,
        result: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(ctx, &[logits, result], 1)
    }
}
