//! Decode attention for CPU adapters (shaders/attention_lanes.wgsl): one invocation per
//! (split, KV head) computes the whole GQA group, reading each key once for all its q
//! heads, with the q/k-norm + RoPE + KV write fused in; with several splits,
//! shaders/attention_combine.wgsl merges the partial results.
//! [`super::attention::Attention`] puts the two together.

use super::attention::AttentionInputs;
use super::lanes_state::{state_partial_wgsl, state_wgsl, Queries, LANES_COMMON_WGSL};
use super::rope_kv::{HeadShape, ROPE_COMMON_WGSL};
use super::{Dispatch, KernelPipeline, Slot, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention_lanes.wgsl");

/// Splits per workgroup (one SIMD batch on CPU adapters).
const LANES: u32 = 8;

pub struct AttentionLanes {
    kernel: KernelPipeline,
    pub shape: HeadShape,
    pub split_len: usize,
}

impl AttentionLanes {
    /// `qk_norm`: apply the per-head RMSNorm (weights bound at dispatch) with `eps`.
    /// Needs head_dim % 4 == 0 and `split_len` in 1..=65,535 (mesa's loop limiter).
    pub fn new(
        ctx: &GpuContext,
        shape: HeadShape,
        (qk_norm, eps): (bool, f32),
        split_len: usize,
    ) -> Result<AttentionLanes> {
        shape.check()?;
        if shape.head_dim % 4 != 0 || !(1..=65_535).contains(&split_len) {
            return Err(Error::InvalidArgument(format!(
                "lanes attention: head_dim {} must be a multiple of 4 and the split length \
                 {split_len} within 1..=65535",
                shape.head_dim
            )));
        }
        let (group, n) = (shape.n_heads / shape.n_kv_heads, shape.head_dim / 4);
        let source = [
            STEP_WGSL,
            ROPE_COMMON_WGSL,
            LANES_COMMON_WGSL,
            &state_wgsl(group, n, Queries::FromQkv),
            &state_partial_wgsl(group, n),
            WGSL,
        ]
        .concat();
        let mut constants = shape.constants();
        constants.push(("SPLIT_LEN", split_len as f64));
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::Read; 4]);
        slots.extend([Slot::ReadWrite; 4]);
        Ok(AttentionLanes {
            kernel: KernelPipeline::new(ctx, "attention_lanes", &source, &slots, &constants),
            shape,
            split_len,
        })
    }

    /// `inputs`' QKV output, norm weights, inv_freq and caches (this step's k and v are
    /// written at `step.pos`; earlier positions hold the history); `out`: n_heads ·
    /// head_dim f32 (one split); `partials`: the split results (see
    /// [`super::attention::partials_bytes`]). Encode with the grid of [`Self::grid`].
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        inputs: &AttentionInputs<'_>,
        out: &wgpu::Buffer,
        partials: &wgpu::Buffer,
    ) -> Dispatch {
        let i = inputs;
        let buffers = [
            i.step, i.qkv, i.q_norm, i.k_norm, i.inv_freq, i.cache.k, i.cache.v, out, partials,
        ];
        let mut d = self.kernel.dispatch(ctx, &buffers, 1);
        d.grid = Self::grid(self.shape, 1);
        d
    }

    /// The grid for `splits` splits of `shape`: workgroups of 8 splits along x, KV heads
    /// along y.
    pub fn grid(shape: HeadShape, splits: u32) -> [u32; 3] {
        [splits.div_ceil(LANES), shape.n_kv_heads as u32, 1]
    }
}
