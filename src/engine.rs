//! The backend-neutral model: one decode step on the GPU, the fast CPU backend or the CPU
//! oracle, behind one interface (`pocketrt run --backend auto|gpu|cpu|reference`).
//! Sampling, sessions and prefix reuse build on this.
//!
//! `Auto` picks the GPU on a real adapter and the fast CPU backend when there is none; on
//! a software adapter (lavapipe, SwiftShader, WARP) it times a probe of the model's layer
//! shapes on both before any weight is read, loads only the faster, and remembers the
//! choice (see `probe.rs`). The description says which and why.

mod embed;
mod kv;
pub mod probe;
mod verify;

pub use kv::{cpu_rows_tag, gpu_rows_tag, layout as kv_layout_of, KvLayout, RowKind};
pub use verify::Verified;

use crate::cpu::fast::{FastModel, Logits, Precision};
use crate::cpu::{KvCache, Model, WeightMode};
use crate::error::{Error, Result};
use crate::format::ModelSource;
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::kernels::topk::TOPK_MAX;
use crate::gpu::plan::TABLET_BUDGET;
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::plan::{Budget, MemoryPlan};
use crate::quant::WeightFormat;
use crate::sampler::Sampler;

/// Context of the CPU backend when none is requested.
const CPU_DEFAULT_CONTEXT: usize = 4096;
use crate::ModelConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The fast CPU backend (`cpu::fast`: SIMD int8 kernels on threads; Q4 and Q8 weights).
    Cpu,
    /// The plain-Rust reference forward pass (`cpu::Model`, the oracle; f32, Q4 or Q8).
    Reference,
    /// wgpu (Vulkan, Metal, DX12; lavapipe where there is no GPU).
    #[cfg(not(target_arch = "wasm32"))]
    Gpu,
    /// Q4, Q8 and keep weights: the GPU on a real adapter, the CPU backend without one;
    /// on a software adapter the faster of the two (predicted by a probe, `probe.rs`),
    /// and the CPU backend where any matrix is Q8. f32 weights: the reference.
    Auto,
}

enum Inner {
    Reference {
        model: Box<Model>,
        cache: KvCache,
    },
    Cpu {
        model: Box<FastModel>,
        cache: KvCache,
    },
    #[cfg(not(target_arch = "wasm32"))]
    Gpu(Box<crate::gpu::GpuModel>),
}

/// A KV cache out of the engine (see [`Engine::swap_slot`]).
pub struct KvSlot {
    cache: KvCache,
    pos: usize,
}

pub struct Engine {
    inner: Inner,
    config: ModelConfig,
    context: usize,
    pos: usize,
    description: String,
    /// [`crate::format::model_fingerprint`] of the source it was loaded from.
    model_id: String,
}

impl Engine {
    /// Load `src` for up to `context` positions within the default (tablet) memory
    /// budget. The GPU and CPU backends run Q4 g64 and Q8 g32 weights, the reference f32
    /// too.
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
    pub fn load_planned(
        src: &mut dyn ModelSource,
        backend: Backend,
        weights: WeightMode,
        context: Option<usize>,
        budget: u64,
    ) -> Result<Engine> {
        let mut engine = Self::load_on(src, backend, weights, context, budget)?;
        engine.model_id = crate::format::model_fingerprint(src);
        Ok(engine)
    }

    #[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
    fn load_on(
        src: &mut dyn ModelSource,
        backend: Backend,
        weights: WeightMode,
        context: Option<usize>,
        budget: u64,
    ) -> Result<Engine> {
        let config = src.config().clone();
        #[cfg(target_arch = "wasm32")]
        let _ = budget; // no GPU memory to plan in this build
        let gpu_wanted = match backend {
            Backend::Cpu | Backend::Reference => false,
            #[cfg(not(target_arch = "wasm32"))]
            Backend::Gpu => true,
            Backend::Auto => weights != WeightMode::F32,
        };
        if weights == WeightMode::F32 {
            let fast_only = "runs Q4 g64 and Q8 g32 weights (use --weights q4, q8 or keep; f32 \
                             on --backend reference)";
            match backend {
                Backend::Cpu => {
                    return Err(Error::InvalidArgument(format!(
                        "the CPU backend {fast_only}"
                    )))
                }
                #[cfg(not(target_arch = "wasm32"))]
                Backend::Gpu => {
                    return Err(Error::InvalidArgument(format!(
                        "the GPU backend {fast_only}"
                    )))
                }
                Backend::Reference | Backend::Auto => {}
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        if gpu_wanted {
            use crate::gpu::{weights, ProfiledContext};
            let format = weights.format().expect("f32 never reaches the GPU");
            let q8 = weights::holds_q8(src, format)?;
            // Limits for the smallest plan; a chosen context's needs are checked below.
            let probe = context.unwrap_or(1).min(config.max_context).max(1);
            match ProfiledContext::open_blocking(weights::limits_needed(&config, probe, q8)) {
                Ok(ctx) => {
                    let budget = Budget {
                        q8_weights: q8,
                        ..Budget::for_device(budget, &ctx)
                    };
                    let plan = MemoryPlan::choose(&config, context, &budget)?;
                    let ctx = std::sync::Arc::new(ctx);
                    if backend == Backend::Auto && ctx.profile.software && q8 {
                        // The CPU adapters' Q8 design (the GPU rows GEMV, without their
                        // code textures) is slower than the CPU backend's int8 tiles.
                        let cpu_context = cpu_context(&config, context)?;
                        let (inner, description) =
                            Self::load_fast_as(src, format, cpu_context, "")?;
                        let why = format!(
                            "{description}; CPU backend: Q8 matrices, which the software \
                             adapter {} runs slower",
                            ctx.adapter.name
                        );
                        return Ok(Engine::new(inner, config, cpu_context, why));
                    }
                    if backend == Backend::Auto && ctx.profile.software {
                        // Decided on a probe before the weights are read: one load.
                        let (decision, why) = Self::probe(&ctx, &config)?;
                        if !decision.gpu {
                            let cpu_context = cpu_context(&config, context)?;
                            let (inner, description) = Self::load_fast(src, cpu_context, "")?;
                            let description = format!("{description}; {why}");
                            return Ok(Engine::new(inner, config, cpu_context, description));
                        }
                        let (model, description) = Self::load_gpu(ctx, src, plan.context, format)?;
                        let description = format!("{description}; {why}");
                        return Ok(Engine::new(
                            Inner::Gpu(model),
                            config,
                            plan.context,
                            description,
                        ));
                    }
                    let (model, description) = Self::load_gpu(ctx, src, plan.context, format)?;
                    let inner = Inner::Gpu(model);
                    return Ok(Engine::new(inner, config, plan.context, description));
                }
                Err(Error::NoGpuAdapter { .. }) if backend == Backend::Auto => {}
                Err(e) => return Err(e),
            }
        }
        let why = if gpu_wanted { "no GPU adapter: " } else { "" };
        let cpu_context = cpu_context(&config, context)?;
        // The fast CPU backend runs q4, q8 and keep weights (f32 was refused above), the
        // reference every mode; Auto without a GPU runs them on the fast CPU backend, f32
        // on the reference.
        let fast =
            backend == Backend::Cpu || (backend == Backend::Auto && weights != WeightMode::F32);
        let (inner, description) = match weights.format() {
            Some(format) if fast => Self::load_fast_as(src, format, cpu_context, why)?,
            _ => Self::load_reference(src, weights, cpu_context, why)?,
        };
        Ok(Engine::new(inner, config, cpu_context, description))
    }

    /// The GPU backend on the device `ctx` (in its profile) with a `context`-position
    /// cache, Q4 weights: what tests use to run one model in every device profile.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_on_gpu(
        ctx: std::sync::Arc<crate::gpu::ProfiledContext>,
        src: &mut dyn ModelSource,
        context: usize,
    ) -> Result<Engine> {
        Self::load_on_gpu_as(ctx, src, context, WeightFormat::Q4)
    }

    /// [`Engine::load_on_gpu`] with each matrix as `weights` holds it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_on_gpu_as(
        ctx: std::sync::Arc<crate::gpu::ProfiledContext>,
        src: &mut dyn ModelSource,
        context: usize,
        weights: WeightFormat,
    ) -> Result<Engine> {
        let config = src.config().clone();
        let (model, description) = Self::load_gpu(ctx, src, context, weights)?;
        let mut engine = Engine::new(Inner::Gpu(model), config, context, description);
        engine.model_id = crate::format::model_fingerprint(src);
        Ok(engine)
    }

    fn new(inner: Inner, config: ModelConfig, context: usize, description: String) -> Engine {
        Engine {
            inner,
            config,
            context,
            pos: 0,
            description,
            model_id: String::new(),
        }
    }

    fn load_reference(
        src: &mut dyn ModelSource,
        weights: WeightMode,
        context: usize,
        why: &str,
    ) -> Result<(Inner, String)> {
        let model = Model::load(src, weights)?;
        let cache = model.new_cache(context)?;
        let mode = weights.name();
        let inner = Inner::Reference {
            model: Box::new(model),
            cache,
        };
        Ok((inner, format!("{why}reference cpu ({mode} weights)")))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn load_fast(src: &mut dyn ModelSource, context: usize, why: &str) -> Result<(Inner, String)> {
        Self::load_fast_as(src, WeightFormat::Q4, context, why)
    }

    /// The fast CPU backend with the matrices in `format`: "cpu (avx2 int8 kernels, ...;
    /// keep weights: q8 g32 + q4 g64)".
    fn load_fast_as(
        src: &mut dyn ModelSource,
        format: WeightFormat,
        context: usize,
        why: &str,
    ) -> Result<(Inner, String)> {
        let model = FastModel::load_as(src, Precision::default(), format)?;
        let cache = model.new_cache(context)?;
        let (kernels, weights) = (model.describe(), model.describe_weights());
        let description = format!("{why}cpu ({kernels}; {weights})");
        let inner = Inner::Cpu {
            model: Box::new(model),
            cache,
        };
        Ok((inner, description))
    }

    /// The backend decision for `config` on the software adapter of `ctx`: remembered from
    /// an earlier load, else probed (and kept); with the sentence saying so.
    #[cfg(not(target_arch = "wasm32"))]
    fn probe(
        ctx: &std::sync::Arc<crate::gpu::ProfiledContext>,
        config: &crate::ModelConfig,
    ) -> Result<(probe::Decision, String)> {
        let adapter = ctx.adapter_label();
        let key = probe::Decision::key(&adapter, config);
        if let Some(d) = probe::remembered(&key) {
            let why = d.reason(&adapter, true);
            return Ok((d, why));
        }
        let d = pollster::block_on(probe::probe(ctx, config))?;
        probe::remember(&key, &d);
        let why = d.reason(&adapter, false);
        Ok((d, why))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn load_gpu(
        ctx: std::sync::Arc<crate::gpu::ProfiledContext>,
        src: &mut dyn ModelSource,
        context: usize,
        weights: WeightFormat,
    ) -> Result<(Box<crate::gpu::GpuModel>, String)> {
        use crate::gpu::tune::{load_tuned, TunedLoad};
        let adapter = ctx.adapter_label();
        let load = TunedLoad::from_env(weights)?;
        let (model, tuning) = load_tuned(ctx, src, context, load)?;
        let tuned = tuning.map_or(String::new(), |t| format!("; {}", t.describe()));
        let description = format!(
            "gpu {adapter}, {} weights ({}), {} dispatches and 1 submit per token, {}{tuned}",
            weights.name(),
            model.weights_summary(),
            model.dispatches_per_token(),
            model.gpu_context().profile
        );
        Ok((Box::new(model), description))
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
            Inner::Reference { model, cache } => {
                choose(&model.forward(token, cache)?, need.is_none(), sampler)?
            }
            Inner::Cpu { model, cache } => {
                choose(&model.forward(token, cache)?, need.is_none(), sampler)?
            }
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => match need {
                None => model.decode(token, self.pos)?,
                Some(k) if (1..=TOPK_MAX).contains(&k) => {
                    // The adjustments and the grammar's mask are applied on the GPU,
                    // before its argmax and top-k.
                    let (sorted, log_z) = model.decode_topk(token, self.pos, sampler)?;
                    sampler.sample_sorted(&sorted, log_z)?
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
            Inner::Reference { .. } | Inner::Cpu { .. } => {
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

    /// Run prompt tokens whose successors are not needed: one batched prefill on the GPU
    /// (chunks of up to [`crate::gpu::forward::PREFILL_CHUNK`] tokens, no readback) where
    /// it pays ([`crate::gpu::GpuModel::feed_all`]); batched prefill on the CPU backend
    /// ([`FastModel::prefill`]); token by token otherwise and on the reference.
    /// Nothing is processed when they do not all fit the context.
    pub fn feed_all(&mut self, tokens: &[u32]) -> Result<()> {
        if self.pos + tokens.len() > self.context {
            return Err(Error::ContextTooLong {
                position: self.context.max(self.pos),
                context: self.context,
            });
        }
        match &mut self.inner {
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => {
                model.feed_all(tokens, self.pos)?;
                self.pos += tokens.len();
            }
            Inner::Cpu { model, cache } => {
                model.prefill(tokens, cache, Logits::None)?;
                self.pos += tokens.len();
            }
            Inner::Reference { .. } => {
                for &t in tokens {
                    self.feed(t)?;
                }
            }
        }
        Ok(())
    }

    /// Forget every position from `pos` on (the cache keeps `0..pos`), so that a history
    /// which diverges there can continue without re-processing its common prefix.
    #[cfg_attr(target_arch = "wasm32", allow(irrefutable_let_patterns))]
    pub fn rewind(&mut self, pos: usize) {
        self.pos = self.pos.min(pos);
        match &mut self.inner {
            Inner::Reference { cache, .. } | Inner::Cpu { cache, .. } => cache.truncate(self.pos),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(_) => {}
        }
    }

    /// The GPU device of a GPU engine (`None` on the CPU backends).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn gpu_context(&self) -> Option<&crate::gpu::ProfiledContext> {
        match &self.inner {
            Inner::Gpu(model) => Some(model.gpu_context()),
            _ => None,
        }
    }

    /// After [`Error::GpuLost`]: open the GPU device again (in the same profile where one
    /// was forced), upload the weights from `src` again, and run `history` (the tokens the
    /// cache held, in order) so that generation goes on where it stopped. The CPU backends
    /// lose nothing: they only rewind to `history`'s length.
    pub fn reload(&mut self, src: &mut dyn ModelSource, history: &[u32]) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Inner::Gpu(model) = &self.inner {
            use crate::gpu::{weights::limits_needed, ProfiledContext};
            let old = model.gpu_context();
            let forced = old.profile.forced.then_some(old.profile.name);
            let format = model.weight_format();
            let need = limits_needed(&self.config, self.context, model.holds_q8());
            let ctx = pollster::block_on(ProfiledContext::open_in(need, forced))?;
            let ctx = std::sync::Arc::new(ctx);
            let (model, _) = Self::load_gpu(ctx, src, self.context, format)?;
            self.inner = Inner::Gpu(model);
            self.pos = 0;
            return self.feed_all(history);
        }
        let _ = src;
        self.rewind(history.len());
        Ok(())
    }

    /// Bytes of one KV cache of this engine's context (`2 · layers · context · kv_dim`
    /// f32 on the CPU backends): what each [`KvSlot`] adds.
    pub fn kv_cache_bytes(&self) -> u64 {
        let c = &self.config;
        2 * c.n_layers as u64 * self.context as u64 * c.kv_dim() as u64 * 4
    }

    /// A second, empty KV cache of this engine's context for [`Engine::swap_slot`]: more
    /// conversations kept on one copy of the weights. CPU backends only: the GPU model
    /// binds its one cache into its pipelines' bind groups.
    pub fn new_slot(&self) -> Result<KvSlot> {
        let cache = match &self.inner {
            Inner::Reference { model, .. } => model.new_cache(self.context)?,
            Inner::Cpu { model, .. } => model.new_cache(self.context)?,
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(_) => {
                return Err(Error::InvalidArgument(
                    "the GPU backend keeps one KV cache per model: more than one slot needs \
                     the CPU backend"
                        .into(),
                ))
            }
        };
        Ok(KvSlot { cache, pos: 0 })
    }

    /// Exchange the engine's KV cache (and position) with `slot`'s: the engine continues
    /// the slot's sequence, the slot keeps the one it had. The slot must come from an
    /// engine of the same model and context.
    pub fn swap_slot(&mut self, slot: &mut KvSlot) -> Result<()> {
        let fits = slot.cache.capacity() == self.context;
        match &mut self.inner {
            Inner::Reference { cache, .. } | Inner::Cpu { cache, .. } if fits => {
                std::mem::swap(cache, &mut slot.cache)
            }
            _ => {
                return Err(Error::InvalidArgument(
                    "this KV slot was not made for this engine".into(),
                ))
            }
        }
        std::mem::swap(&mut self.pos, &mut slot.pos);
        Ok(())
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
        self.feed_all(head)?;
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return Ok(out);
        }
        self.greedy_from(last, |next, _| {
            out.push(next);
            Ok(on_token(next) && out.len() < n)
        })?;
        Ok(out)
    }

    /// Greedy decoding from `first` at the next position: `on_token(token, position)`
    /// gets each token with the cache length after the step that made it, and says
    /// whether to feed it and go on. On the GPU the steps are pipelined one ahead (the
    /// host never waits for a token before submitting the next step,
    /// [`crate::gpu::GpuModel::greedy_pipelined`]); the tokens are the same.
    pub fn greedy_from(
        &mut self,
        first: u32,
        on_token: impl FnMut(u32, usize) -> Result<bool>,
    ) -> Result<()> {
        self.pipelined_from(first, None, on_token)
    }

    /// The draws of `sampler` when this engine makes them on its GPU, pipelined like
    /// greedy ([`Engine::sampled_from`]): natively on the GPU backend, for the samplers
    /// [`Sampler::gpu_draws`] accepts. `None`: step by step ([`Engine::step_sampled`]).
    pub fn gpu_draws(&self, sampler: &Sampler) -> Option<crate::sampler::GpuDraws> {
        match &self.inner {
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(_) => sampler.gpu_draws(TOPK_MAX),
            _ => {
                let _ = sampler;
                None
            }
        }
    }

    /// Sampled decoding from `first`, as [`Engine::greedy_from`]: each token drawn on the
    /// GPU from its top-k with the next number of `draws` ([`Engine::gpu_draws`]), the
    /// steps pipelined one ahead ([`crate::gpu::GpuModel::sampled_pipelined`]).
    pub fn sampled_from(
        &mut self,
        first: u32,
        draws: &mut crate::sampler::GpuDraws,
        on_token: impl FnMut(u32, usize) -> Result<bool>,
    ) -> Result<()> {
        self.pipelined_from(first, Some(draws), on_token)
    }

    /// Greedy (`draws` `None`) or GPU-drawn decoding from `first`, pipelined on the GPU.
    fn pipelined_from(
        &mut self,
        first: u32,
        draws: Option<&mut crate::sampler::GpuDraws>,
        mut on_token: impl FnMut(u32, usize) -> Result<bool>,
    ) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Inner::Gpu(model) = &mut self.inner {
            // The model checks the position against its context (the engine's). On an
            // error the position stays: what was written past it is overwritten.
            self.pos += match draws {
                Some(d) => model.sampled_pipelined(first, self.pos, d, &mut on_token)?,
                None => model.greedy_pipelined(first, self.pos, &mut on_token)?,
            };
            return Ok(());
        }
        if draws.is_some() {
            return Err(Error::InvalidArgument(
                "GPU draws on a backend without a GPU (Engine::gpu_draws says which)".into(),
            ));
        }
        let mut token = first;
        loop {
            token = self.step(token)?;
            if !on_token(token, self.pos)? {
                return Ok(());
            }
        }
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

/// The context of a CPU backend: the one requested or the default, within the model's.
fn cpu_context(config: &ModelConfig, requested: Option<usize>) -> Result<usize> {
    let context = requested.unwrap_or(CPU_DEFAULT_CONTEXT.min(config.max_context));
    if context == 0 || context > config.max_context {
        return Err(Error::InvalidArgument(format!(
            "context {context} is outside 1..={} (the model's context)",
            config.max_context
        )));
    }
    Ok(context)
}

/// The next token from CPU logits: the argmax when `greedy`, else the sampler's draw.
pub(crate) fn choose(logits: &[f32], greedy: bool, sampler: &mut Sampler) -> Result<u32> {
    if greedy {
        crate::cpu::ops::argmax(logits)
            .map(|i| i as u32)
            .ok_or_else(|| Error::InvalidArgument("the logits are all NaN".into()))
    } else {
        sampler.sample_logits(logits)
    }
}
