//! A sampled step's draw on the GPU (shaders/sample_draw.wgsl): from the top-k kernel's
//! sorted candidates and a uniform number the host's seeded generator supplies, the token
//! [`crate::sampler::draw`] would choose (in f32; it is in f64), written where the next
//! step's embedding reads it, so that sampled decoding pipelines like greedy.

use super::topk::TOPK_MAX;
use super::{Dispatch, KernelPipeline, Slot};
use crate::gpu::device::GpuContext;
use crate::sampler::SamplerConfig;

const WGSL: &str = include_str!("../../../shaders/sample_draw.wgsl");

/// The draw's settings and number (`struct Draw` in the shader), written per step.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DrawUniform {
    pub r: f32,
    pub inv_t: f32,
    pub top_k: u32,
    pub top_p: f32,
    pub min_p: f32,
    pub pad: [u32; 3],
}

impl DrawUniform {
    /// The draw of `config` (not greedy, top-k within [`TOPK_MAX`]) with number `r`.
    pub fn new(config: &SamplerConfig, r: f64) -> DrawUniform {
        DrawUniform {
            r: r as f32,
            inv_t: (1.0 / f64::from(config.temperature)) as f32,
            top_k: config.top_k.min(TOPK_MAX) as u32,
            top_p: config.top_p,
            min_p: config.min_p,
            pad: [0; 3],
        }
    }
}

pub struct SampleDraw {
    kernel: KernelPipeline,
}

impl SampleDraw {
    pub fn new(ctx: &GpuContext) -> SampleDraw {
        let slots = [Slot::Read, Slot::ReadWrite, Slot::Uniform];
        SampleDraw {
            kernel: KernelPipeline::new(ctx, "sample_draw", WGSL, &slots, &[]),
        }
    }

    /// Bytes of the uniform buffer.
    pub fn uniform_bytes() -> u64 {
        std::mem::size_of::<DrawUniform>() as u64
    }

    /// `candidates`: the top-k result ([`super::topk::TopK::result_bytes`]); `token`: 2
    /// u32 (the chosen token, its logit bits; token `u32::MAX` when there was no
    /// candidate); `params`: a [`DrawUniform`].
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        candidates: &wgpu::Buffer,
        token: &wgpu::Buffer,
        params: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel.dispatch(ctx, &[candidates, token, params], 1)
    }
}
