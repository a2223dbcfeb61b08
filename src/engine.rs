//! The backend-neutral model: one greedy decode step on the CPU oracle or the GPU, behind
//! one interface (`pocketrt run --backend cpu|gpu`). Sampling, sessions and prefix reuse
//! build on this (see the GPU engine and prefill issues).

use crate::cpu::{KvCache, Model, WeightMode};
use crate::error::{Error, Result};
use crate::format::ModelSource;
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::kernels::topk::TOPK_MAX;
use crate::gpu::plan::TABLET_BUDGET;
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::plan::{Budget, MemoryPlan};
use crate::sampler::Sampler;

/// Context of the CPU backend when none is requested.
const CPU_DEFAULT_CONTEXT: usize = 4096;
use crate::ModelConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The plain-Rust reference forward pass.
    Cpu,
    /// wgpu (Vulkan, Metal, DX12; lavapipe where there is no GPU).
    #[cfg(not(target_arch = "wasm32"))]
    Gpu,
    /// The GPU when an adapter exists (and the weights are Q4), else the CPU.
    Auto,
}

enum Inner {
    Cpu {
        model: Box<Model>,
        cache: KvCache,
    },
    #[cfg(not(target_arch = "wasm32"))]
    Gpu(Box<crate::gpu::GpuModel>),
}

pub struct Engine {
    inner: Inner,
    config: ModelConfig,
    context: usize,
    pos: usize,
    description: String,
}

impl Engine {
    /// Load `src` for up to `context` positions within the default (tablet) memory
    /// budget. The GPU backend runs Q4 g64 weights only.
    pub fn load(
        src: &mut dyn ModelSource,
        backend: Backend,
        weights: WeightMode,
        context: usize,
    ) -> Result<Engine> {
        Self::load_planned(src, backend, weights, Some(context), TABLET_BUDGET)
    }

    /// Load `src` with `context` positions, or (`None`) the largest context the memory
    /// planner fits into `budget` bytes on the GPU (on the CPU: up to 4,096). A plan that
    /// does not fit fails before anything is allocated on the device.
    #[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
    pub fn load_planned(
        src: &mut dyn ModelSource,
        backend: Backend,
        weights: WeightMode,
        context: Option<usize>,
        budget: u64,
    ) -> Result<Engine> {
        let config = src.config().clone();
        let gpu_wanted = match backend {
            Backend::Cpu => false,
            #[cfg(not(target_arch = "wasm32"))]
            Backend::Gpu => {
                if weights != WeightMode::Q4 {
                    return Err(Error::InvalidArgument(
                        "the GPU backend runs Q4 g64 weights only (use --weights q4)".into(),
                    ));
                }
                true
            }
            Backend::Auto => weights == WeightMode::Q4,
        };
        #[cfg(not(target_arch = "wasm32"))]
        if gpu_wanted {
            use crate::gpu::{weights::limits_needed, GpuContext};
            // Limits for the smallest plan; a chosen context's needs are checked below.
            let probe = context.unwrap_or(1).min(config.max_context).max(1);
            match GpuContext::new_blocking(limits_needed(&config, probe)) {
                Ok(ctx) => {
                    let plan =
                        MemoryPlan::choose(&config, context, &Budget::new(budget, &ctx.limits))?;
                    let (inner, description) = Self::load_gpu(ctx, src, plan.context)?;
                    return Ok(Engine::new(inner, config, plan.context, description));
                }
                Err(Error::NoGpuAdapter { .. }) if backend == Backend::Auto => {}
                Err(e) => return Err(e),
            }
        }
        let context = context.unwrap_or(CPU_DEFAULT_CONTEXT.min(config.max_context));
        if context == 0 || context > config.max_context {
            return Err(Error::InvalidArgument(format!(
                "context {context} is outside 1..={} (the model's context)",
                config.max_context
            )));
        }
        let why = if gpu_wanted { "no GPU adapter: " } else { "" };
        let (inner, description) = Self::load_cpu(src, weights, context, why)?;
        Ok(Engine::new(inner, config, context, description))
    }

    fn new(inner: Inner, config: ModelConfig, context: usize, description: String) -> Engine {
        Engine {
            inner,
            config,
            context,
            pos: 0,
            description,
        }
    }

    fn load_cpu(
        src: &mut dyn ModelSource,
        weights: WeightMode,
        context: usize,
        why: &str,
    ) -> Result<(Inner, String)> {
        let model = Model::load(src, weights)?;
        let cache = model.new_cache(context)?;
        let mode = match weights {
            WeightMode::F32 => "f32",
            WeightMode::Q4 => "q4",
        };
        let inner = Inner::Cpu {
            model: Box::new(model),
            cache,
        };
        Ok((inner, format!("{why}cpu ({mode} weights)")))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn load_gpu(
        ctx: crate::gpu::GpuContext,
        src: &mut dyn ModelSource,
        context: usize,
    ) -> Result<(Inner, String)> {
        let adapter = format!("{} ({})", ctx.adapter.name, ctx.adapter.backend);
        let model = crate::gpu::GpuModel::load(std::sync::Arc::new(ctx), src, context)?;
        let description = format!(
            "gpu {adapter}, {} dispatches and 1 submit per token",
            model.dispatches_per_token()
        );
        Ok((Inner::Gpu(Box::new(model)), description))
    }

    /// Run `token` at the next position; returns the greedy next token.
    pub fn step(&mut self, token: u32) -> Result<u32> {
        self.step_sampled(token, &mut Sampler::greedy())
    }

    /// Run `token` at the next position and choose the next token with `sampler`. The
    /// GPU reads back only what the sampler needs: the argmax (greedy), the 64 best
    /// candidates (top-k ≤ 64) or, for wider sampling, all logits.
    pub fn step_sampled(&mut self, token: u32, sampler: &mut Sampler) -> Result<u32> {
        if self.pos >= self.context {
            return Err(Error::ContextTooLong {
                position: self.pos,
                context: self.context,
            });
        }
        let need = sampler.candidates_needed();
        let next = match &mut self.inner {
            Inner::Cpu { model, cache } => {
                let logits = model.forward(token, cache)?;
                match need {
                    None => crate::cpu::ops::argmax(&logits)
                        .ok_or_else(|| Error::InvalidArgument("the logits are all NaN".into()))?
                        as u32,
                    Some(_) => sampler.sample_logits(&logits)?,
                }
            }
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => match need {
                None => model.decode(token, self.pos)?,
                Some(k) if (1..=TOPK_MAX).contains(&k) => {
                    sampler.sample_sorted(&model.decode_topk(token, self.pos)?)?
                }
                Some(_) => sampler.sample_logits(&model.decode_with_logits(token, self.pos)?.1)?,
            },
        };
        self.pos += 1;
        Ok(next)
    }

    /// Run a prompt token whose successor is not needed (the GPU does not wait).
    pub fn feed(&mut self, token: u32) -> Result<()> {
        match &mut self.inner {
            Inner::Cpu { .. } => {
                self.step(token)?;
            }
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => {
                if self.pos >= self.context {
                    return Err(Error::ContextTooLong {
                        position: self.pos,
                        context: self.context,
                    });
                }
                model.feed(token, self.pos)?;
                self.pos += 1;
            }
        }
        Ok(())
    }

    /// Forget every position from `pos` on (the cache keeps `0..pos`), so that a history
    /// which diverges there can continue without re-processing its common prefix.
    #[cfg_attr(target_arch = "wasm32", allow(irrefutable_let_patterns))]
    pub fn rewind(&mut self, pos: usize) {
        self.pos = self.pos.min(pos);
        if let Inner::Cpu { cache, .. } = &mut self.inner {
            cache.truncate(self.pos);
        }
    }

    /// Positions the cache holds.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Greedy continuation: feed `prompt`, then `n` generated tokens (fewer when
    /// `on_token` returns false). Returns the generated tokens.
    pub fn greedy(
        &mut self,
        prompt: &[u32],
        n: usize,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>> {
        let Some((&last, head)) = prompt.split_last() else {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        };
        for &t in head {
            self.feed(t)?;
        }
        let mut out = Vec::with_capacity(n);
        let mut next = self.step(last)?;
        while out.len() < n {
            out.push(next);
            if !on_token(next) || out.len() == n {
                break;
            }
            next = self.step(next)?;
        }
        Ok(out)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Tokens in the cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Backend, adapter and per-token dispatch figures, for `--verbose` output.
    pub fn description(&self) -> &str {
        &self.description
    }
}
