//! GPU top-k over the logits for sampling: the host reads back the 64 best (index,
//! logit) pairs, sorted, instead of the whole vocabulary; under a constraint, the 64
//! best of the tokens its mask allows.
//!
//! Radix select in two passes (shaders/topk.wgsl): `groups` workgroups of 256 each
//! select the 64 best of a chunk of consecutive logits, and one workgroup selects and
//! sorts the 64 best of those `groups · 64` candidates. The chunk count balances the
//! two: about √(n / 64) workgroups (49 for a 151,936 vocabulary), so each invocation of
//! either pass reads about as many elements per digit (13 there).

use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/topk.wgsl");

/// Candidates returned (`K` in topk.wgsl); samplers with a larger top-k read all logits.
pub const TOPK_MAX: usize = 64;
/// Most workgroups of the first pass (the scratch buffer holds 64 candidates of each).
const MAX_GROUPS: usize = 128;

pub struct TopK {
    chunks: KernelPipeline,
    merge: KernelPipeline,
    groups: u32,
    pub n: usize,
}

/// (workgroups of the first pass, logits each reads) for `n` logits.
fn chunking(n: usize) -> (usize, usize) {
    let n = n.max(1);
    let groups = ((n as f64 / TOPK_MAX as f64).sqrt().ceil() as usize).clamp(1, MAX_GROUPS);
    let chunk = n.div_ceil(groups);
    (n.div_ceil(chunk), chunk)
}

impl TopK {
    pub fn new(ctx: &GpuContext, n: usize) -> TopK {
        let slots = [Slot::Read, Slot::ReadWrite, Slot::ReadWrite, Slot::Read];
        let (groups, chunk) = chunking(n);
        // 8-bit digits of the largest index: ties at the 64th place are split by index.
        let index_bits = usize::BITS - n.saturating_sub(1).leading_zeros();
        let index_digits = index_bits.div_ceil(8).max(1);
        let pass = |label: &str, p: f64| {
            let constants = [
                ("N", n as f64),
                ("PASS", p),
                ("GROUPS", groups as f64),
                ("CHUNK", chunk as f64),
                ("IDX_DIGITS", f64::from(index_digits)),
            ];
            KernelPipeline::new(ctx, label, WGSL, &slots, &constants)
        };
        TopK {
            chunks: pass("topk/radix/chunks", 0.0),
            merge: pass("topk/radix/merge", 1.0),
            groups: groups as u32,
            n,
        }
    }

    /// Bytes of the scratch buffer between the passes.
    pub fn scratch_bytes() -> u64 {
        (MAX_GROUPS * TOPK_MAX) as u64 * 8
    }

    /// Bytes of the result: `TOPK_MAX` × (index u32, value f32 bits), best first;
    /// entries past the number of non-NaN logits have index `u32::MAX`.
    pub fn result_bytes() -> u64 {
        TOPK_MAX as u64 * 8
    }

    /// The two passes, in order. `mask`: the allowed-token mask
    /// ([`super::argmax::mask_words`] words; word 0 zero: all allowed).
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        logits: &wgpu::Buffer,
        scratch: &wgpu::Buffer,
        result: &wgpu::Buffer,
        mask: &wgpu::Buffer,
    ) -> [Dispatch; 2] {
        let buffers = [logits, scratch, result, mask];
        [
            self.chunks.dispatch(ctx, &buffers, self.groups),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_logits_within_the_scratch() {
        for n in [
            1, 63, 64, 65, 256, 1000, 65_536, 151_936, 262_144, 10_000_000,
        ] {
            let (groups, chunk) = chunking(n);
            assert!((1..=MAX_GROUPS).contains(&groups), "n = {n}");
            assert!(groups * chunk >= n && (groups - 1) * chunk < n, "n = {n}");
        }
        assert_eq!(chunking(151_936), (49, 3101));
    }
}
