//! Choosing the backend of a browser load (`backend: "webgpu" | "cpu" | "auto"`) and the
//! place the shards stream into: GPU buffers or the CPU model's buffers in wasm memory.
//!
//! Auto: no `navigator.gpu` or no adapter → CPU; a software adapter (the device profile's
//! `software`, `gpu::profile`) → a probe of the model's layer shapes is timed on both
//! before any weight arrives (`engine::probe`; the decision is kept in Cache Storage per
//! adapter and shape), and only the faster is loaded; a real GPU → WebGPU. A package
//! holding Q8 g32 matrices (`convert --weights q8|keep`) runs as stored on either: on a
//! real GPU in WebGPU (its Q8 kernels), on a software adapter on the CPU backend (the
//! adapter's Q8 design is slower), and where a matrix stack mixes Q4 and Q8 (which
//! streams to the CPU only) on the CPU backend (`webgpu` is refused with a typed error).

use super::device::{gpu_for, require_webgpu};
use super::kept;
use super::load::{LoadReport, Progress};
use super::model::WebModel;
use super::options::{Choice, LoadOptions};
use crate::config::ModelConfig;
use crate::cpu::fast::{FastModel, Precision, StreamedTensors};
use crate::engine::probe::{self, Decision};
use crate::error::{Error, Result};
use crate::format::package::{Chunk, DType, Manifest};
use crate::gpu::plan::MemoryPlan;
use crate::gpu::stream_upload::{ShardWriter, StreamedWeights};
use crate::gpu::tune::TunePolicy;
use crate::gpu::{GpuModel, ProfiledContext};
use crate::quant::WeightFormat;
use std::cell::RefCell;
use std::sync::Arc;

/// A GPU destination: device, empty weight buffers and the planned context.
struct Gpu {
    ctx: Arc<ProfiledContext>,
    weights: StreamedWeights,
    context: usize,
    adapter: String,
}

/// Where the shards go, and why: the GPU or the CPU, never both.
pub struct Target {
    gpu: Option<Gpu>,
    cpu: Option<RefCell<StreamedTensors>>,
    /// The GPU candidate's device ([`Decided::gpu_context`]), for `info`.
    device: Option<Arc<ProfiledContext>>,
    /// Requested context (the CPU cache's size).
    context: usize,
    reason: String,
}

/// Where a load's model goes, decided before any weight arrives (nothing allocated yet).
pub struct Decided {
    /// The GPU the model goes to, with its memory plan.
    gpu: Option<(Arc<ProfiledContext>, MemoryPlan)>,
    /// The software adapter a probe ran on and kept the CPU backend over (for `info`).
    probed: Option<Arc<ProfiledContext>>,
    /// Why, for `info.backendReason`.
    pub reason: String,
    /// The context asked for (the CPU cache's size; the GPU plan's may be less).
    context: usize,
}

impl Decided {
    /// Decide where the model of `manifest` goes for `context` positions: a GPU in the
    /// device profile called `profile` (`None`: detected) or the CPU. `cache`: the Cache
    /// Storage a probe's decision is kept in.
    pub async fn new(
        choice: Choice,
        profile: Option<&str>,
        manifest: &Manifest,
        context: usize,
        cache: Option<&str>,
    ) -> Result<Decided> {
        let config = &manifest.config;
        let cpu = |reason: String| Decided {
            gpu: None,
            probed: None,
            reason,
            context,
        };
        let gpu = |ctx, plan, reason: String| Decided {
            gpu: Some((ctx, plan)),
            probed: None,
            reason,
            context,
        };
        let q8 = q8_matrices(manifest);
        let stacks = StreamedWeights::check_stacks(config, &manifest.tensors);
        Ok(match choice {
            Choice::Cpu => cpu("requested (backend: \"cpu\")".into()),
            Choice::WebGpu => {
                stacks?;
                require_webgpu()?;
                let (ctx, plan) = gpu_for(config, context, profile, q8 > 0).await?;
                gpu(ctx, plan, "requested (backend: \"webgpu\")".into())
            }
            Choice::Auto if stacks.is_err() => cpu(format!(
                "{q8} matrices in Q8 g32, some stacked with Q4 g64 ones, which the CPU \
                 backend runs as stored (WebGPU streams one format per stack)"
            )),
            Choice::Auto => match require_webgpu() {
                Err(_) => cpu("no WebGPU in this browser (navigator.gpu is missing)".into()),
                Ok(()) => match gpu_for(config, context, profile, q8 > 0).await {
                    Err(Error::NoGpuAdapter { detail }) | Err(Error::NoWebGpu(detail)) => {
                        cpu(format!("no WebGPU adapter ({detail})"))
                    }
                    Err(e) => return Err(e),
                    Ok((ctx, _)) if ctx.profile.software && q8 > 0 => Decided {
                        probed: Some(ctx.clone()),
                        ..cpu(format!(
                            "{q8} matrices in Q8 g32, which the CPU backend runs as stored \
                             faster than the software adapter {}",
                            ctx.adapter_label()
                        ))
                    },
                    Ok((ctx, plan)) if ctx.profile.software => {
                        let adapter = ctx.adapter_label();
                        let (d, why) = decision(&ctx, config, &adapter, cache).await?;
                        let reason = format!("software adapter {adapter}; {why}");
                        match d.gpu {
                            true => gpu(ctx, plan, reason),
                            false => Decided {
                                probed: Some(ctx),
                                ..cpu(reason)
                            },
                        }
                    }
                    Ok((ctx, plan)) => {
                        let reason = format!("GPU adapter {}", ctx.adapter_label());
                        gpu(ctx, plan, reason)
                    }
                },
            },
        })
    }

    /// "webgpu" or "cpu".
    pub fn backend(&self) -> &'static str {
        match self.gpu {
            Some(_) => "webgpu",
            None => "cpu",
        }
    }

    /// The GPU's device (with its profile): the one the model goes to, or the software
    /// adapter a probe kept the CPU backend over.
    pub fn gpu_context(&self) -> Option<&Arc<ProfiledContext>> {
        self.gpu
            .as_ref()
            .map(|(ctx, _)| ctx)
            .or(self.probed.as_ref())
    }
}

/// Where the model of `manifest` goes under `opts` (backend, profile, cache), for the
/// context they ask for ([`requested_context`]).
pub async fn decide(manifest: &Manifest, opts: &LoadOptions) -> Result<Decided> {
    let context = requested_context(&manifest.config, opts);
    let (profile, cache) = (opts.profile.as_deref(), opts.cache_name.as_deref());
    Decided::new(opts.backend, profile, manifest, context, cache).await
}

impl Target {
    /// Allocate `manifest`'s model where `d` says, for the context it was decided for.
    pub fn new(d: Decided, manifest: &Manifest) -> Result<Target> {
        manifest.validate()?;
        Self::of_table(d, manifest)
    }

    /// [`Target::new`] for a tensor table the engine made itself, with no shards behind it
    /// (a GGUF converted as it streams: `GgufStream::manifest`).
    pub fn of_table(d: Decided, manifest: &Manifest) -> Result<Target> {
        let device = d.gpu_context().cloned();
        let gpu = match d.gpu {
            Some((ctx, plan)) => Some(gpu(ctx, plan, manifest)?),
            None => None,
        };
        let cpu = match gpu {
            Some(_) => None,
            None => Some(RefCell::new(StreamedTensors::of_table(manifest))),
        };
        Ok(Target {
            gpu,
            cpu,
            device,
            context: d.context,
            reason: d.reason,
        })
    }

    /// The context the load will have (the GPU plan's when the GPU is a candidate).
    pub fn context(&self) -> usize {
        self.gpu.as_ref().map_or(self.context, |g| g.context)
    }

    /// Record in `report` where the model goes: its context, the adapter ("none (CPU)"
    /// without the GPU) and the device's profile (also of a software adapter a probe
    /// kept the CPU backend over).
    pub fn report_to(&self, report: &mut LoadReport) {
        report.context = self.context();
        report.adapter = self
            .gpu
            .as_ref()
            .map_or_else(|| "none (CPU)".into(), |g| g.adapter.clone());
        if let Some(ctx) = self.device.as_deref() {
            report.set_device(ctx);
        }
    }

    /// A writer for one shard's chunks.
    pub fn writer(&self) -> TargetWriter<'_> {
        TargetWriter {
            gpu: self.gpu.as_ref().map(|g| g.weights.writer(&g.ctx)),
            cpu: self.cpu.as_ref(),
            error: None,
        }
    }

    /// Build the model from the filled buffers, on the GPU in the design `tune` chooses
    /// (`web/tune.rs`; its sweep is the load's "tuning" phase); returns it and the reason
    /// for its backend (with what the tuner did).
    pub async fn finish(
        self,
        tune: TunePolicy,
        progress: &Progress<'_>,
    ) -> Result<(WebModel, String)> {
        if let Some(g) = self.gpu {
            let config = g.weights.config().clone();
            let weights = g.weights.finish()?;
            let (ctx, tuning) =
                super::tune::tuned(g.ctx, &config, &weights, tune, progress).await?;
            let model = GpuModel::with_weights(ctx, config, weights, g.context)?;
            let reason = match tuning {
                Some(t) => format!("{}; {}", self.reason, t.describe()),
                None => self.reason,
            };
            return Ok((WebModel::Gpu(Box::new(model)), reason));
        }
        let cell = self.cpu.expect("a target without a GPU has the CPU");
        // Each matrix as the package stores it: Q4 g64 or Q8 g32.
        let mut src = cell.into_inner();
        let model = FastModel::load_as(&mut src, Precision::default(), WeightFormat::Keep)?;
        Ok((WebModel::cpu(model, self.context)?, self.reason))
    }
}

/// How many of `manifest`'s tensors are Q8 g32 matrices.
fn q8_matrices(manifest: &Manifest) -> usize {
    let q8 = |t: &&crate::format::package::TensorEntry| t.dtype == DType::Q8g32;
    manifest.tensors.iter().filter(q8).count()
}

/// Empty weight buffers for the GPU, and its planned context.
fn gpu(ctx: Arc<ProfiledContext>, plan: MemoryPlan, manifest: &Manifest) -> Result<Gpu> {
    let weights = StreamedWeights::allocate_for(&ctx, &manifest.config, &manifest.tensors)?;
    Ok(Gpu {
        adapter: ctx.adapter_label(),
        ctx,
        weights,
        context: plan.context,
    })
}

/// The kind of kept decision a probe's is (`kept.rs`; natively `engine/probe.rs`'s).
const KEPT: &str = "backend-choice";

/// The backend decision for `config` on the software adapter of `ctx`: kept in `cache`
/// from an earlier load, else probed (and kept); with the sentence saying so.
async fn decision(
    ctx: &Arc<ProfiledContext>,
    config: &ModelConfig,
    adapter: &str,
    cache: Option<&str>,
) -> Result<(Decision, String)> {
    let key = Decision::key(adapter, config);
    if let Some(d) = kept::remembered::<Decision>(cache, KEPT, &key).await {
        let why = d.reason(adapter, true);
        return Ok((d, why));
    }
    let started = web_time::Instant::now();
    let d = probe::probe(ctx, config).await?;
    let probe_ms = started.elapsed().as_millis();
    kept::remember(cache, KEPT, &key, &d).await;
    let why = format!("{}; probed in {probe_ms} ms", d.reason(adapter, false));
    Ok((d, why))
}

/// Writes one shard's chunks to every destination of a [`Target`].
pub struct TargetWriter<'a> {
    gpu: Option<ShardWriter<'a>>,
    cpu: Option<&'a RefCell<StreamedTensors>>,
    error: Option<Error>,
}

impl TargetWriter<'_> {
    pub fn write(&mut self, c: Chunk<'_>) {
        if let Some(w) = &mut self.gpu {
            w.write(c);
        }
        if let Some(cpu) = self.cpu {
            if let Err(e) = cpu.borrow_mut().write(c) {
                self.error.get_or_insert(e);
            }
        }
    }

    /// Flush; the first error of any destination.
    pub fn finish(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.gpu.map_or(Ok(()), ShardWriter::finish)
    }
}

/// Context when the caller names none (bounded by the model's).
const DEFAULT_CONTEXT: usize = 4096;

/// The context the caller asked for, else the default (bounded by the model's).
fn requested_context(config: &ModelConfig, opts: &LoadOptions) -> usize {
    opts.context
        .unwrap_or(DEFAULT_CONTEXT.min(config.max_context))
}
