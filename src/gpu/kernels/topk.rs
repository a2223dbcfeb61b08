//! GPU top-k over the logits for sampling: the host reads back the 64 best (index,
//! logit) pairs, sorted, instead of the whole vocabulary.

use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/topk.wgsl");

/// Candidates returned (`K` in topk.wgsl); samplers with a larger top-k read all logits.
pub const TOPK_MAX: usize = 64;
/// Invocations of the first pass (`LANES` in topk.wgsl), in workgroups of 64.
const LANES: u32 = 256;

pub struct TopK {
    partial: KernelPipeline,
    merge: KernelPipeline,
    pub n: usize,
}

impl TopK {
    pub fn new(ctx: &GpuContext, n: usize) -> TopK {
        let slots = [Slot::Read, Slot::ReadWrite, Slot::ReadWrite];
        let pass = |p: f64| {
            KernelPipeline::new(ctx, "topk", WGSL, &slots, &[("N", n as f64), ("PASS", p)])
        };
        TopK {
            partial: pass(0.0),
            merge: pass(1.0),
            n,
        }
    }

    /// Bytes of the scratch buffer between the passes.
    pub fn scratch_bytes() -> u64 {
        u64::from(LANES) * TOPK_MAX as u64 * 8
    }

    /// Bytes of the result: `TOPK_MAX` × (index u32, value f32 bits), best first;
    /// entries past the number of non-NaN logits have index `u32::MAX`.
    pub fn result_bytes() -> u64 {
        TOPK_MAX as u64 * 8
    }

    /// The two passes, in order.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        logits: &wgpu::Buffer,
        scratch: &wgpu::Buffer,
        result: &wgpu::Buffer,
    ) -> [Dispatch; 2] {
        let buffers = [logits, scratch, result];
        [
            self.partial.dispatch(ctx, &buffers, LANES / 64),
            self.merge.dispatch(ctx, &buffers, 1),
        ]
    }
}

/// Decode the result buffer's bytes into (token, logit) pairs, best first.
pub fn parse_result(bytes: &[u8]) -> Vec<(u32, f32)> {
    bytes
        .chunks_exact(8)
        .map(|c| {
            let idx = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let val = f32::from_le_bytes([c[4], c[5], c[6], c[7]]);
            (idx, val)
        })
        .take_while(|&(idx, _)| idx != u32::MAX)
        .collect()
}
