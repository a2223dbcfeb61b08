//! Decode attention for one query token (GQA, softmax) with the q/k-norm + RoPE + KV-cache
//! write fused in (shaders/attention.wgsl), split along the context into chunks of
//! `split_len` positions when the history is longer than one chunk (flash-decoding: the
//! splits write partial results that shaders/attention_combine.wgsl merges).

use super::rope_kv::{HeadShape, KvBuffers};
use super::{Dispatch, KernelPipeline, Slot, REDUCE64_WGSL, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention.wgsl");
const COMBINE_WGSL: &str = include_str!("../../../shaders/attention_combine.wgsl");

/// Positions per split on GPUs: short chunks, so that the heads × splits workgroups
/// fill the device. Also the shortest split any adapter uses (it sizes the partials).
pub const GPU_SPLIT_LEN: usize = 256;

/// Positions per split: [`GPU_SPLIT_LEN`] on GPUs; on CPU adapters (two to a few dozen
/// threads, ~22 µs per extra dispatch) the 14-ish heads already keep every thread busy,
/// so they split only very long histories.
pub fn default_split_len(ctx: &GpuContext) -> usize {
    if ctx.adapter.is_cpu {
        16 * GPU_SPLIT_LEN
    } else {
        GPU_SPLIT_LEN
    }
}

/// Bytes of the partial results of `shape` split every `split_len` positions: per head and
/// split, head_dim sums, the max score and the sum of exponentials (f32).
pub fn partials_bytes(shape: HeadShape, split_len: usize) -> u64 {
    (shape.n_heads * shape.context.div_ceil(split_len.max(1)) * (shape.head_dim + 2) * 4) as u64
}

/// The inputs of one layer's attention.
#[derive(Clone, Copy)]
pub struct AttentionInputs<'a> {
    /// The uniform with the step's position.
    pub step: &'a wgpu::Buffer,
    /// The QKV GEMV's output: q | k | v.
    pub qkv: &'a wgpu::Buffer,
    /// q and k norm weights (head_dim each; any small buffer without QK-norm).
    pub q_norm: &'a wgpu::Buffer,
    pub k_norm: &'a wgpu::Buffer,
    /// [`super::rope_kv::rope_inv_freq`].
    pub inv_freq: &'a wgpu::Buffer,
    pub cache: KvBuffers<'a>,
    /// Scores scratch: [`Attention::scratch_bytes`].
    pub scores: &'a wgpu::Buffer,
}

/// The dispatches of one layer's attention: `single` when the history fits one split,
/// else `split` then `combine` (the split count, hence the grid, follows the position).
pub struct AttentionDispatch {
    pub single: Dispatch,
    pub split: Dispatch,
    pub combine: Dispatch,
}

pub struct Attention {
    attend: KernelPipeline,
    combine: KernelPipeline,
    pub shape: HeadShape,
    pub split_len: usize,
}

impl Attention {
    /// `qk_norm`: apply the per-head RMSNorm (weights bound at dispatch) with `eps`.
    pub fn new(
        ctx: &GpuContext,
        shape: HeadShape,
        qk_norm: bool,
        eps: f32,
        split_len: usize,
    ) -> Result<Attention> {
        shape.check()?;
        if split_len == 0 || split_len > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "attention split length {split_len}: must be positive"
            )));
        }
        let mut constants = shape.constants();
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        constants.push(("SPLIT_LEN", split_len as f64));
        let source = [STEP_WGSL, REDUCE64_WGSL, WGSL].concat();
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::Read; 4]);
        slots.extend([Slot::ReadWrite; 4]);
        let attend = KernelPipeline::new(ctx, "attention", &source, &slots, &constants);
        let combine_constants = [
            ("N_HEADS", shape.n_heads as f64),
            ("HD", shape.head_dim as f64),
            ("SPLIT_LEN", split_len as f64),
        ];
        let combine = KernelPipeline::new(
            ctx,
            "attention_combine",
            &[STEP_WGSL, COMBINE_WGSL].concat(),
            &[Slot::Uniform, Slot::Read, Slot::ReadWrite],
            &combine_constants,
        );
        Ok(Attention {
            attend,
            combine,
            shape,
            split_len,
        })
    }

    /// Bytes of the scores scratch buffer: `n_heads · context` f32.
    pub fn scratch_bytes(&self) -> u64 {
        (self.shape.n_heads * self.shape.context * 4) as u64
    }

    /// Bytes of the partial-results buffer this kernel needs (at least).
    pub fn partials_bytes(&self) -> u64 {
        partials_bytes(self.shape, self.split_len)
    }

    /// Splits for the step at position `pos`.
    pub fn splits_at(&self, pos: usize) -> u32 {
        (pos / self.split_len + 1) as u32
    }

    /// The dispatches for one layer: `out` receives n_heads · head_dim floats;
    /// `partials` is at least [`Attention::partials_bytes`] of scratch. This step's k and v are
    /// written to `inputs.cache` at the step's position.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        inputs: AttentionInputs<'_>,
        partials: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> AttentionDispatch {
        let i = inputs;
        let attend = |dst| {
            let buffers = [
                i.step, i.qkv, i.q_norm, i.k_norm, i.inv_freq, i.cache.k, i.cache.v, i.scores, dst,
            ];
            self.attend
                .dispatch(ctx, &buffers, self.shape.n_heads as u32)
        };
        AttentionDispatch {
            single: attend(out),
            split: attend(partials),
            combine: self.combine.dispatch(
                ctx,
                &[i.step, partials, out],
                self.shape.n_heads as u32,
            ),
        }
    }
}

impl AttentionDispatch {
    /// Encode the attention of the step at `pos` (one dispatch, or split + combine).
    pub fn encode(&self, kernel: &Attention, pos: usize, pass: &mut wgpu::ComputePass<'_>) {
        let splits = kernel.splits_at(pos);
        if splits == 1 {
            self.single.encode(pass);
        } else {
            let [heads, _, _] = self.split.grid;
            self.split.encode_grid(pass, [heads, splits, 1]);
            self.combine.encode(pass);
        }
    }

    /// Dispatches encoded at `pos`.
    pub fn count(kernel: &Attention, pos: usize) -> usize {
        if kernel.splits_at(pos) == 1 {
            1
        } else {
            2
        }
    }
}
