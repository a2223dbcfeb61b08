//! GPU argmax over the logits: the host reads back 4 bytes, not the vocabulary. Under
//! a constraint only the tokens of the allowed-token mask compete ([`mask_words`]).

use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/argmax.wgsl");

pub struct Argmax {
    kernel: KernelPipeline,
    pub n: usize,
}

impl Argmax {
    pub fn new(ctx: &GpuContext, n: usize) -> Argmax {
        let slots = [Slot::Read, Slot::ReadWrite, Slot::Read];
        Argmax {
            kernel: KernelPipeline::new(ctx, "argmax", WGSL, &slots, &[("N", n as f64)]),
            n,
        }
    }

    /// `result`: 2 u32 (index, value bits); the index is what decode reads back.
    /// `mask`: [`mask_words`] words, word 0 zero (all allowed) or not (bits 1..).
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        logits: &wgpu::Buffer,
        result: &wgpu::Buffer,
        mask: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(ctx, &[logits, result, mask], 1)
    }
}

/// Words of the allowed-token mask buffer of `n` logits that argmax and top-k read: the
/// flag (nonzero: masked), then bit `i % 32` of word `1 + i / 32` for token `i`.
pub fn mask_words(n: usize) -> usize {
    1 + n.div_ceil(32)
}
