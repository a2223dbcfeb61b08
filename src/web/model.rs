//! A model in the browser on either backend: WebGPU (`GpuModel`, awaited steps) or the
//! fast CPU backend in wasm memory (`FastModel` with its KV cache, simd128 kernels), and
//! the calibration that times both on a software adapter (the native engine's
//! [`StepTimer`] and [`verdict`]).

use crate::cpu::fast::{FastModel, Logits};
use crate::cpu::KvCache;
use crate::engine::calibrate::{verdict, StepTimer, CACHE};
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

    /// `"webgpu"` or `"cpu"` (the JS API's names).
    pub fn backend(&self) -> &'static str {
        match self {
            WebModel::Gpu(_) => "webgpu",
            WebModel::Cpu { .. } => "cpu",
        }
    }

    /// Run prompt tokens at `pos..` whose successors are not needed (on the GPU: batched
    /// prefill where it pays, [`crate::gpu::GpuModel::feed_all`]; on the CPU: batched
    /// prefill, [`FastModel::prefill`]).
    pub fn feed_all(&mut self, tokens: &[u32], pos: usize) -> Result<()> {
        match self {
            WebModel::Gpu(m) => m.feed_all(tokens, pos),
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
                    sampler.sample_sorted(&model.decode_topk_async(token, pos).await?)
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

/// Time a few decode steps on the software adapter's model and on the CPU model, keep the
/// faster; returns it with the sentence saying what was measured.
pub async fn faster(
    mut gpu: GpuModel,
    cpu: FastModel,
    cpu_context: usize,
    adapter: &str,
) -> Result<(WebModel, String)> {
    let mut t = StepTimer::default();
    let mut pos = 0;
    while t.more() {
        gpu.decode_async(0, pos % gpu.context).await?;
        pos += 1;
        t.stepped();
    }
    let gpu_rate = t.rate();
    let mut scratch = cpu.new_cache(CACHE)?;
    let mut t = StepTimer::default();
    while t.more() {
        cpu.forward(0, &mut scratch)?;
        t.stepped();
    }
    let (gpu_won, measured) = verdict(t.rate(), gpu_rate, adapter);
    if gpu_won {
        drop(cpu);
        Ok((WebModel::Gpu(Box::new(gpu)), measured))
    } else {
        gpu.destroy();
        Ok((WebModel::cpu(cpu, cpu_context)?, measured))
    }
}
