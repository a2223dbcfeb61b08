//! Choosing the backend of a browser load (`backend: "webgpu" | "cpu" | "auto"`) and the
//! place the shards stream into: GPU buffers, the CPU model's buffers in wasm memory, or —
//! for a calibration — both.
//!
//! Auto: no `navigator.gpu` or no adapter → CPU; a software adapter (the device profile's
//! `software`, `gpu::profile`) → both are loaded, a few decode steps are timed on each and
//! the faster is kept; a real GPU → WebGPU.

use super::loader::{adapter_name, gpu_for, require_webgpu};
use super::model::{faster, WebModel};
use crate::cpu::fast::{FastModel, Precision, StreamedTensors};
use crate::error::{Error, Result};
use crate::format::package::{Chunk, Manifest};
use crate::gpu::stream_upload::{ShardWriter, StreamedWeights};
use crate::gpu::{GpuContext, GpuModel};
use std::cell::RefCell;
use std::sync::Arc;

/// The backend the caller asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    WebGpu,
    Cpu,
    #[default]
    Auto,
}

impl Choice {
    /// `"webgpu"`, `"cpu"` or `"auto"` (default when absent).
    pub fn parse(name: Option<&str>) -> Result<Choice> {
        match name {
            None | Some("auto") => Ok(Choice::Auto),
            Some("webgpu") => Ok(Choice::WebGpu),
            Some("cpu") => Ok(Choice::Cpu),
            Some(other) => Err(Error::InvalidArgument(format!(
                "backend {other:?}: use \"webgpu\", \"cpu\" or \"auto\""
            ))),
        }
    }
}

/// A GPU destination: device, empty weight buffers and the planned context.
struct Gpu {
    ctx: Arc<GpuContext>,
    weights: StreamedWeights,
    context: usize,
    adapter: String,
}

/// Where the shards go, and why.
pub struct Target {
    gpu: Option<Gpu>,
    cpu: Option<RefCell<StreamedTensors>>,
    /// Requested context (the CPU cache's size).
    context: usize,
    reason: String,
}

impl Target {
    /// Decide where `manifest`'s model goes for `context` positions and allocate it there;
    /// a GPU in the device profile called `profile` (`None`: detected).
    pub async fn choose(
        choice: Choice,
        profile: Option<&str>,
        manifest: &Manifest,
        context: usize,
    ) -> Result<Target> {
        let mut t = Target {
            gpu: None,
            cpu: None,
            context,
            reason: String::new(),
        };
        match choice {
            Choice::Cpu => t.reason = "requested (backend: \"cpu\")".into(),
            Choice::WebGpu => {
                require_webgpu()?;
                t.gpu = Some(gpu(manifest, context, profile).await?);
                t.reason = "requested (backend: \"webgpu\")".into();
            }
            Choice::Auto => match require_webgpu() {
                Err(_) => t.reason = "no WebGPU in this browser (navigator.gpu is missing)".into(),
                Ok(()) => match gpu(manifest, context, profile).await {
                    Err(Error::NoGpuAdapter { detail }) | Err(Error::NoWebGpu(detail)) => {
                        t.reason = format!("no WebGPU adapter ({detail})")
                    }
                    Err(e) => return Err(e),
                    Ok(g) if g.ctx.profile.software => {
                        t.reason = format!("software adapter {}", g.adapter);
                        t.gpu = Some(g);
                        t.cpu = Some(RefCell::new(StreamedTensors::new(manifest)?));
                    }
                    Ok(g) => {
                        t.reason = format!("GPU adapter {}", g.adapter);
                        t.gpu = Some(g);
                    }
                },
            },
        }
        if t.gpu.is_none() {
            t.cpu = Some(RefCell::new(StreamedTensors::new(manifest)?));
        }
        Ok(t)
    }

    /// The context the load will have (the GPU plan's when the GPU is a candidate).
    pub fn context(&self) -> usize {
        self.gpu.as_ref().map_or(self.context, |g| g.context)
    }

    /// The adapter, or "none (CPU)".
    pub fn adapter(&self) -> String {
        self.gpu
            .as_ref()
            .map_or_else(|| "none (CPU)".into(), |g| g.adapter.clone())
    }

    /// The GPU candidate's device (with its profile), if the GPU is one.
    pub fn gpu_context(&self) -> Option<&GpuContext> {
        self.gpu.as_ref().map(|g| &*g.ctx)
    }

    /// A writer for one shard's chunks.
    pub fn writer(&self) -> TargetWriter<'_> {
        TargetWriter {
            gpu: self.gpu.as_ref().map(|g| g.weights.writer(&g.ctx)),
            cpu: self.cpu.as_ref(),
            error: None,
        }
    }

    /// Build the model from the filled buffers (calibrating when both were filled); returns
    /// it and the reason for its backend.
    pub async fn finish(self) -> Result<(WebModel, String)> {
        let cpu = match self.cpu {
            Some(cell) => Some(FastModel::load(
                &mut cell.into_inner(),
                Precision::default(),
            )?),
            None => None,
        };
        let gpu = match self.gpu {
            Some(g) => {
                let config = g.weights.config().clone();
                let model = GpuModel::with_weights(g.ctx, config, g.weights.finish()?, g.context)?;
                Some((model, g.adapter))
            }
            None => None,
        };
        match (gpu, cpu) {
            (Some((gpu, adapter)), Some(cpu)) => {
                let (model, measured) = faster(gpu, cpu, self.context, &adapter).await?;
                Ok((model, format!("{}; {measured}", self.reason)))
            }
            (Some((gpu, _)), None) => Ok((WebModel::Gpu(Box::new(gpu)), self.reason)),
            (None, Some(cpu)) => Ok((WebModel::cpu(cpu, self.context)?, self.reason)),
            (None, None) => unreachable!("a target always has a destination"),
        }
    }
}

/// Device (in the profile called `profile`, `None`: detected), plan and empty buffers for
/// the GPU.
async fn gpu(manifest: &Manifest, context: usize, profile: Option<&str>) -> Result<Gpu> {
    let (ctx, plan) = gpu_for(&manifest.config, context, profile).await?;
    let weights = StreamedWeights::allocate(&ctx, manifest)?;
    Ok(Gpu {
        adapter: adapter_name(&ctx),
        ctx,
        weights,
        context: plan.context,
    })
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
