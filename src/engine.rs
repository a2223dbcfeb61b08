//! The backend-neutral model: one greedy decode step on the CPU oracle or the GPU, behind
//! one interface (`pocketrt run --backend cpu|gpu`). Sampling, sessions and prefix reuse
//! build on this (see the GPU engine and prefill issues).

use crate::cpu::{KvCache, Model, WeightMode};
use crate::error::{Error, Result};
use crate::format::ModelSource;
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::kernels::topk::TOPK_MAX;
use crate::sampler::Sampler;
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
    /// Load `src` for up to `context` positions. The GPU backend runs Q4 g64 weights only.
    pub fn load(
        src: &mut dyn ModelSource,
        backend: Backend,
        weights: WeightMode,
        context: usize,
    ) -> Result<Engine> {
        let config = src.config().clone();
        if context == 0 || context > config.max_context {
            return Err(Error::InvalidArgument(format!(
                "context {context} is outside 1..={} (the model's context)",
                config.max_context
            )));
        }
        let (inner, description) = match backend {
            #[cfg(not(target_arch = "wasm32"))]
            Backend::Auto if weights == WeightMode::Q4 => {
                use crate::gpu::{weights::limits_needed, GpuContext};
                match GpuContext::new_blocking(limits_needed(&config, context)) {
                    Ok(ctx) => Self::load_gpu(ctx, src, context)?,
                    Err(Error::NoGpuAdapter { .. }) => {
                        Self::load_cpu(src, weights, context, "no GPU adapter: ")?
                    }
                    Err(e) => return Err(e),
                }
            }
            Backend::Cpu | Backend::Auto => Self::load_cpu(src, weights, context, "")?,
            #[cfg(not(target_arch = "wasm32"))]
            Backend::Gpu => {
                if weights != WeightMode::Q4 {
                    return Err(Error::InvalidArgument(
                        "the GPU backend runs Q4 g64 weights only (use --weights q4)".into(),
                    ));
                }
                use crate::gpu::{weights::limits_needed, GpuContext};
                let ctx = GpuContext::new_blocking(limits_needed(&config, context))?;
                Self::load_gpu(ctx, src, context)?
            }
        };
        Ok(Engine {
            inner,
            config,
            context,
            pos: 0,
            description,
        })
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
