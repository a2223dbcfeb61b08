//! Batched q/k RMSNorm (optional) + RoPE + KV-cache write for a prefill chunk: what the
//! decode attention kernels do for one token before attending, for every token at once.

use super::common::rope_kv::{rope_inputs_wgsl, HeadShape, KvBuffers, ROPE_COMMON_WGSL};
use super::common::wgsl::CHUNK_WGSL;
use super::{Dispatch, KernelPipeline, Slot};
use crate::error::Result;
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/rope_kv_prefill.wgsl");

pub struct RopeKvPrefill {
    kernel: KernelPipeline,
    pub shape: HeadShape,
}

impl RopeKvPrefill {
    /// `qk_norm`: apply the per-head RMSNorm (weights bound at dispatch) with `eps`.
    pub fn new(
        ctx: &GpuContext,
        shape: HeadShape,
        qk_norm: bool,
        eps: f32,
    ) -> Result<RopeKvPrefill> {
        shape.check()?;
        let mut constants = shape.constants();
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        let inputs = rope_inputs_wgsl(false, qk_norm, shape.head_dim);
        let source = [CHUNK_WGSL, ROPE_COMMON_WGSL, &inputs, WGSL].concat();
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::Read; 4]);
        slots.extend([Slot::ReadWrite; 3]);
        Ok(RopeKvPrefill {
            kernel: KernelPipeline::new(ctx, "rope_kv_prefill", &source, &slots, &constants),
            shape,
        })
    }

    /// Workgroups for `tokens` tokens (one invocation per token and head).
    pub fn workgroups(&self, tokens: usize) -> u32 {
        let heads = self.shape.n_heads + 2 * self.shape.n_kv_heads;
        (tokens * heads).div_ceil(64) as u32
    }

    /// `qkv`: the QKV GEMM's output (tokens × (q_dim + 2 kv_dim)); norms and `inv_freq`
    /// as for [`super::common::attention::AttentionInputs`]; `q_out`: tokens × q_dim.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        chunk: &wgpu::Buffer,
        qkv: &wgpu::Buffer,
        q_norm: &wgpu::Buffer,
        k_norm: &wgpu::Buffer,
        inv_freq: &wgpu::Buffer,
        q_out: &wgpu::Buffer,
        cache: KvBuffers<'_>,
        max_tokens: usize,
    ) -> Dispatch {
        self.kernel.dispatch(
            ctx,
            &[
                chunk, qkv, q_norm, k_norm, inv_freq, q_out, cache.k, cache.v,
            ],
            self.workgroups(max_tokens),
        )
    }
}
