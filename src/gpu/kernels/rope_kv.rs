//! Per-head q/k RMSNorm (optional) + RoPE (neox) + KV-cache write for one token
//! (shaders/rope_kv.wgsl: one invocation per head; the CPU adapters' decode attention runs
//! it before shaders/attention_lanes.wgsl).

use super::{Dispatch, KernelPipeline, Slot, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/rope_kv.wgsl");
/// sin_cos, shared by the RoPE kernels.
pub(crate) const ROPE_COMMON_WGSL: &str = include_str!("../../../shaders/rope_common.wgsl");

/// Heads per workgroup (one SIMD batch on CPU adapters).
const HEADS_PER_GROUP: u32 = 8;

/// Largest head dimension the attention kernels hold in registers / workgroup memory.
pub const MAX_HEAD_DIM: usize = 256;

/// Attention shape shared by the rope/KV-write and attention kernels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Positions the KV cache holds.
    pub context: usize,
}

impl HeadShape {
    pub fn check(&self) -> Result<()> {
        let ok = self.n_heads > 0
            && self.n_kv_heads > 0
            && self.n_heads % self.n_kv_heads == 0
            && self.head_dim % 2 == 0
            && (2..=MAX_HEAD_DIM).contains(&self.head_dim)
            && self.context > 0;
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "attention shape {self:?}: heads must be a multiple of KV heads, head_dim even and at most {MAX_HEAD_DIM}, context positive"
            )))
        }
    }

    /// Bytes of one layer's K (or V) cache: f16 values.
    pub fn cache_bytes(&self) -> u64 {
        (self.n_kv_heads * self.context * self.head_dim * 2) as u64
    }

    pub(crate) fn constants(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("N_HEADS", self.n_heads as f64),
            ("N_KV", self.n_kv_heads as f64),
            ("HD", self.head_dim as f64),
            ("CTX", self.context as f64),
        ]
    }
}

/// `θ^(-2i/d)` for i in 0..d/2, computed in f64 and rounded to f32.
pub fn rope_inv_freq(theta: f32, head_dim: usize) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|i| (f64::from(theta)).powf(-2.0 * i as f64 / head_dim as f64) as f32)
        .collect()
}

/// One layer's K and V cache buffers.
#[derive(Clone, Copy)]
pub struct KvBuffers<'a> {
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
}

pub struct RopeKv {
    kernel: KernelPipeline,
    pub shape: HeadShape,
}

impl RopeKv {
    /// `qk_norm`: apply the per-head RMSNorm (weights bound at dispatch) with `eps`.
    pub fn new(ctx: &GpuContext, shape: HeadShape, qk_norm: bool, eps: f32) -> Result<RopeKv> {
        shape.check()?;
        let mut constants = shape.constants();
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        let source = [STEP_WGSL, ROPE_COMMON_WGSL, WGSL].concat();
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::ReadWrite,
            Slot::ReadWrite,
        ];
        Ok(RopeKv {
            kernel: KernelPipeline::new(ctx, "rope_kv", &source, &slots, &constants),
            shape,
        })
    }

    /// `qkv`: the QKV output; `q_norm`/`k_norm`: head_dim weights (any small buffer
    /// without QK-norm); `inv_freq`: [`rope_inv_freq`]; `q_out`: roped q; caches: one
    /// layer's K and V ([`HeadShape::cache_bytes`] each).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        step: &wgpu::Buffer,
        qkv: &wgpu::Buffer,
        q_norm: &wgpu::Buffer,
        k_norm: &wgpu::Buffer,
        inv_freq: &wgpu::Buffer,
        q_out: &wgpu::Buffer,
        cache: KvBuffers<'_>,
    ) -> Dispatch {
        let heads = (self.shape.n_heads + 2 * self.shape.n_kv_heads) as u32;
        self.kernel.dispatch(
            ctx,
            &[step, qkv, q_norm, k_norm, inv_freq, q_out, cache.k, cache.v],
            heads.div_ceil(HEADS_PER_GROUP),
        )
    }
}
