//! The sampler's logit adjustments (bias, repetition, frequency and presence penalties:
//! [`crate::sampler::LogitAdjust`]) applied to the logits in place on the GPU, before the
//! argmax and top-k, so that the readback holds the adjusted best tokens
//! (shaders/logit_adjust.wgsl).
//!
//! The list lives in a buffer the step uploads, padded to whole workgroups of 64 with
//! unused entries; it grows (a new buffer and bind group) when a step needs more room.

use super::{Dispatch, KernelPipeline, Slot};
use crate::error::Result;
use crate::gpu::device::GpuContext;
use crate::sampler::LogitAdjust;

const WGSL: &str = include_str!("../../../shaders/logit_adjust.wgsl");

/// Entries per workgroup (`@workgroup_size` in the shader).
const WG: usize = 64;
/// Entries the list holds at first (16 KiB): a 64-token window and its biases fit.
pub const INITIAL_ENTRIES: usize = 1024;
/// The padding entry: its token is never in the vocabulary.
const UNUSED: LogitAdjust = LogitAdjust {
    token: u32::MAX,
    bias: 0.0,
    factor: 1.0,
    penalty: 0.0,
};

pub struct LogitAdjustKernel {
    kernel: KernelPipeline,
    list: wgpu::Buffer,
    entries: usize,
    dispatch: Dispatch,
}

impl LogitAdjustKernel {
    /// The kernel over `logits` (`n` of them) with a list of [`INITIAL_ENTRIES`].
    pub fn new(ctx: &GpuContext, logits: &wgpu::Buffer, n: usize) -> Result<LogitAdjustKernel> {
        let slots = [Slot::ReadWrite, Slot::Read];
        let kernel = KernelPipeline::new(ctx, "logit_adjust", WGSL, &slots, &[("N", n as f64)]);
        let list = ctx.storage("logit adjustments", Self::list_bytes(INITIAL_ENTRIES))?;
        let dispatch = kernel.dispatch(ctx, &[logits, &list], 0);
        Ok(LogitAdjustKernel {
            kernel,
            list,
            entries: INITIAL_ENTRIES,
            dispatch,
        })
    }

    /// Bytes of a list of `entries`.
    pub fn list_bytes(entries: usize) -> u64 {
        (entries * std::mem::size_of::<LogitAdjust>()) as u64
    }

    /// Upload `adjust` (growing the list when it does not fit); returns the workgroups
    /// that apply it to `logits` ([`LogitAdjustKernel::encode`]), 0 for an empty list.
    pub fn upload(
        &mut self,
        ctx: &GpuContext,
        logits: &wgpu::Buffer,
        adjust: &[LogitAdjust],
    ) -> Result<u32> {
        let padded = adjust.len().div_ceil(WG) * WG;
        if padded == 0 {
            return Ok(0);
        }
        if padded > self.entries {
            let entries = padded.next_power_of_two();
            self.list.destroy();
            self.list = ctx.storage("logit adjustments", Self::list_bytes(entries))?;
            self.dispatch = self.kernel.dispatch(ctx, &[logits, &self.list], 0);
            self.entries = entries;
        }
        let mut list = adjust.to_vec();
        list.resize(padded, UNUSED);
        ctx.queue
            .write_buffer(&self.list, 0, bytemuck::cast_slice(&list));
        Ok((padded / WG) as u32)
    }

    /// Apply the uploaded list (`groups` from [`LogitAdjustKernel::upload`]).
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>, groups: u32) {
        if groups > 0 {
            self.dispatch.encode_grid(pass, [groups, 1, 1]);
        }
    }

    pub fn destroy(&self) {
        self.list.destroy();
    }
}
