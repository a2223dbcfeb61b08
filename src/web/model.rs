//! A model in the browser on either backend: WebGPU (`GpuModel`, awaited steps) or the
//! fast CPU backend in wasm memory (`FastModel` with its KV cache, simd128 kernels).

use crate::cpu::fast::{FastModel, Logits};
use crate::cpu::KvCache;
use crate::engine::choose;
use crate::error::Result;
use crate::gpu::kernels::topk::TOPK_MAX;
use crate::gpu::GpuModel;
use crate::sampler::Sampler;
use crate::ModelConfig;

/// A loaded model on the backend that runs it.
pub enum WebModel {
    Gpu(Box<GpuModel>),
    Cpu {
        model: Box<FastModel>,
        cache: KvCache,
    },
}

impl WebModel {
    /// The CPU model with a cache of `context` positions.
    pub fn cpu(model: FastModel, context: usize) -> Result<WebModel> {
        let cache = model.new_cache(context)?;
        Ok(WebModel::Cpu {
            model: Box::new(model),
            cache,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        match self {
            WebModel::Gpu(m) => &m.config,
            WebModel::Cpu { model, .. } => &model.config,
        }
    }

    /// Positions the KV cache holds.
    pub fn context(&self) -> usize {
        match self {
            WebModel::Gpu(m) => m.context,
            WebModel::Cpu { cache, .. } => cache.capacity(),
        }
    }

    /// The GPU device, on WebGPU.
    pub fn gpu_context(&self) -> Option<&crate::gpu::GpuContext> {
        match self {
            WebModel::Gpu(m) => Some(m.gpu_context()),
            WebModel::Cpu { .. } => None,
        }
    }

    /// `"webgpu"` or `"cpu"` (the JS API's names).
    pub fn backend(&self) -> &'static str {
        match self {
            WebModel::Gpu(_) => "webgpu",
            WebModel::Cpu { .. } => "cpu",
        }
    }

    /// Run prompt tokens at `pos..` whose successors are not needed (on the GPU: batched
    /// prefill where it pays, [`crate::gpu::GpuModel::feed_all_async`], at most
    /// `MAX_IN_FLIGHT` command buffers queued; on the CPU: batched
    /// prefill, [`FastModel::prefill`]).
    pub async fn feed_all(&mut self, tokens: &[u32], pos: usize) -> Result<()> {
        match self {
            WebModel::Gpu(m) => m.feed_all_async(tokens, pos).await,
            WebModel::Cpu { model, cache } => {
                cache.truncate(pos);
                model.prefill(tokens, cache, Logits::None).map(drop)
            }
        }
    }

    /// One decode step at `pos`; the GPU reads back only what `sampler` needs.
    pub async fn step(&mut self, token: u32, pos: usize, sampler: &mut Sampler) -> Result<u32> {
        let need = sampler.candidates_needed();
        match self {
            WebModel::Gpu(model) => match need {
                None => model.decode_async(token, pos).await,
                Some(k) if (1..=TOPK_MAX).contains(&k) => {
                    // The adjustments are applied on the GPU, before its top-k.
                    let (sorted, log_z) = model.decode_topk_async(token, pos, sampler).await?;
                    sampler.sample_sorted(&sorted, log_z)
                }
                Some(_) => sampler.sample_logits(&model.decode_logits_async(token, pos).await?),
            },
            WebModel::Cpu { model, cache } => {
                cache.truncate(pos);
                choose(&model.forward(token, cache)?, need.is_none(), sampler)
            }
        }
    }

    /// Free GPU memory (the CPU model's memory goes with the value).
    pub fn destroy(self) {
        if let WebModel::Gpu(m) = self {
            m.destroy();
        }
    }
}
