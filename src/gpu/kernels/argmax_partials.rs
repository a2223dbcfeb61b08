//! The fused head argmax's second pass (shaders/argmax_partials.wgsl): the GPU design's
//! LM head GEMV writes each workgroup's best row ([`super::common::gemv_spec::Epilogue::StoreArgmax`]),
//! and one 256-wide workgroup reduces those partials to the token, in [`super::argmax`]'s
//! result layout (index, value bits): the same result as the argmax over the logits.

use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/argmax_partials.wgsl");

pub struct ArgmaxPartials {
    kernel: KernelPipeline,
    /// Partials reduced (the head GEMV's workgroups).
    pub groups: u32,
}

impl ArgmaxPartials {
    pub fn new(ctx: &GpuContext, groups: u32) -> ArgmaxPartials {
        let slots = [Slot::Read, Slot::ReadWrite];
        let constants = [("G", f64::from(groups))];
        ArgmaxPartials {
            kernel: KernelPipeline::new(ctx, "argmax_partials", WGSL, &slots, &constants),
            groups,
        }
    }

    /// Bytes of the partials buffer: `groups` × (index u32, value f32 bits).
    pub fn partials_bytes(groups: u32) -> u64 {
        8 * u64::from(groups.max(1))
    }

    /// `partials`: [`ArgmaxPartials::partials_bytes`]; `result`: 2 u32 (index, value bits).
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        partials: &wgpu::Buffer,
        result: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(ctx, &[partials, result], 1)
    }
}
