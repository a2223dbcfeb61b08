//! The GPU device: instance, adapter and device, chosen automatically or by
//! `POCKETRT_BACKEND`, with WebGPU's default limits unless the model needs more (and the
//! adapter has it), and the optional features (timestamp queries, shader-f16, subgroups)
//! detected but never required.

use crate::error::{Error, Result};

/// Optional adapter features the engine may use for faster kernel variants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptionalFeatures {
    pub timestamp_query: bool,
    pub shader_f16: bool,
    pub subgroups: bool,
    /// WGSL's `packed_4x8_integer_dot_product` language extension (`unpack4xU8` and its
    /// kin): naga implements it; a browser advertises it in
    /// `navigator.gpu.wgslLanguageFeatures` (Safari does not).
    pub packed_4x8: bool,
}

impl OptionalFeatures {
    fn from_wgpu(f: wgpu::Features, wgsl: wgpu::WgslLanguageFeatures) -> Self {
        OptionalFeatures {
            packed_4x8: wgsl.contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct),
            timestamp_query: f.contains(wgpu::Features::TIMESTAMP_QUERY),
            shader_f16: f.contains(wgpu::Features::SHADER_F16),
            subgroups: f.contains(wgpu::Features::SUBGROUP),
        }
    }
}

/// What the device profile is decided from (`gpu::profile`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    /// `Cpu` for lavapipe, SwiftShader, WARP (on the web: `isFallbackAdapter`). Only
    /// `gpu::profile` decides anything from the adapter.
    pub device_type: wgpu::DeviceType,
    /// Present on the adapter; enabled on the device (they cost nothing to enable).
    pub features: OptionalFeatures,
    /// The subgroup width, when the device has subgroups and they all have one width
    /// (lavapipe: 8, its 256-bit SIMD lanes).
    pub subgroup_size: Option<u32>,
}

/// Resource sizes a model needs; checked against the adapter before the device is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitsNeeded {
    /// Largest single buffer, bytes.
    pub max_buffer: u64,
    /// Largest storage binding, bytes.
    pub max_storage_binding: u64,
}

/// The device and queue with what was learned about the adapter.
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
    pub limits: wgpu::Limits,
    /// Bytes of every buffer created through the helpers in `buffers.rs`.
    /// [`GpuContext::counted_apart`] makes a context of the same device with its own.
    pub(crate) allocated: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Errors the device reported outside error scopes (wgpu's default is to panic), and
    /// why it was lost once it is (see [`GpuContext::check_errors`]).
    errors: std::sync::Arc<std::sync::Mutex<Vec<Reported>>>,
    lost: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// The device's compiled pipelines, shared by every context on it.
    pub(crate) pipelines: super::pipeline_cache::PipelineCache,
}

/// An error the device reported: `fatal` (out of memory, internal) leaves the device's
/// state unknown, so it is a lost device ([`Error::GpuLost`]); a validation error is a
/// bug of ours ([`Error::Gpu`]).
struct Reported {
    fatal: bool,
    message: String,
}

/// Parse `POCKETRT_BACKEND` (vulkan, metal, dx12, gl, webgpu; comma-separated).
pub fn backends_from_env() -> Result<wgpu::Backends> {
    match std::env::var("POCKETRT_BACKEND") {
        Ok(s) if !s.trim().is_empty() => parse_backends(&s),
        _ => Ok(wgpu::Backends::all()),
    }
}

/// Parse a comma-separated backend list; unknown names are an error (wgpu would only warn).
pub fn parse_backends(s: &str) -> Result<wgpu::Backends> {
    let mut out = wgpu::Backends::empty();
    for name in s.split(',').map(|n| n.trim().to_ascii_lowercase()) {
        out |= match name.as_str() {
            "vulkan" | "vk" => wgpu::Backends::VULKAN,
            "metal" | "mtl" => wgpu::Backends::METAL,
            "dx12" | "d3d12" => wgpu::Backends::DX12,
            "gl" | "gles" | "opengl" => wgpu::Backends::GL,
            "webgpu" => wgpu::Backends::BROWSER_WEBGPU,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "POCKETRT_BACKEND: unknown GPU backend {other:?} (use vulkan, metal, dx12, gl or webgpu)"
                )))
            }
        };
    }
    Ok(out)
}

/// WebGPU's default limits, raised only where `need` exceeds them; an error when the
/// adapter cannot provide what is needed.
pub fn limits_for(need: LimitsNeeded, adapter: &wgpu::Limits) -> Result<wgpu::Limits> {
    let mut limits = wgpu::Limits::defaults();
    let raise = |what: &'static str, needed: u64, default: u64, available: u64| {
        if needed <= default {
            Ok(default)
        } else if needed <= available {
            Ok(needed)
        } else {
            Err(Error::ExceedsDeviceLimits {
                what: "the model".into(),
                limit: what,
                needed,
                available,
            })
        }
    };
    limits.max_buffer_size = raise(
        "max_buffer_size",
        need.max_buffer,
        limits.max_buffer_size,
        adapter.max_buffer_size,
    )?;
    limits.max_storage_buffer_binding_size = raise(
        "max_storage_buffer_binding_size",
        need.max_storage_binding,
        limits.max_storage_buffer_binding_size,
        adapter.max_storage_buffer_binding_size,
    )?;
    Ok(limits)
}

fn instance() -> Result<wgpu::Instance> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = backends_from_env()?;
    Ok(wgpu::Instance::new(desc))
}

/// Every adapter of `POCKETRT_BACKEND`'s backends (else all), as "name (backend, type)",
/// with what the engine learns of it.
#[cfg(not(target_arch = "wasm32"))]
pub fn list_adapters() -> Result<Vec<(String, AdapterSummary)>> {
    let instance = instance()?;
    let adapters = pollster::block_on(instance.enumerate_adapters(backends_from_env()?));
    Ok(adapters
        .iter()
        .map(|a| {
            let i = a.get_info();
            let label = format!("{} ({}, {:?})", i.name, i.backend, i.device_type);
            (label, summarize(&instance, a))
        })
        .collect())
}

/// The adapter whose name contains `POCKETRT_ADAPTER` (case-insensitive), if it is set.
#[cfg(not(target_arch = "wasm32"))]
async fn adapter_by_name(instance: &wgpu::Instance) -> Result<Option<wgpu::Adapter>> {
    let want = match std::env::var("POCKETRT_ADAPTER") {
        Ok(s) if !s.trim().is_empty() => s.trim().to_lowercase(),
        _ => return Ok(None),
    };
    let adapters = instance.enumerate_adapters(backends_from_env()?).await;
    let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
    match adapters
        .into_iter()
        .find(|a| a.get_info().name.to_lowercase().contains(&want))
    {
        Some(a) => Ok(Some(a)),
        None => Err(Error::NoGpuAdapter {
            detail: format!("no adapter name contains {want:?} (adapters: {names:?})"),
        }),
    }
}

#[cfg(target_arch = "wasm32")]
async fn adapter_by_name(_: &wgpu::Instance) -> Result<Option<wgpu::Adapter>> {
    Ok(None)
}

/// What the engine learns of an adapter before opening it: its summary (features enabled
/// on the device) and its limits.
fn summarize(instance: &wgpu::Instance, adapter: &wgpu::Adapter) -> AdapterSummary {
    let info = adapter.get_info();
    let wgsl = instance.wgsl_language_features();
    let features = OptionalFeatures::from_wgpu(adapter.features(), wgsl);
    let fixed_width = info.subgroup_min_size == info.subgroup_max_size;
    AdapterSummary {
        subgroup_size: (features.subgroups && fixed_width).then_some(info.subgroup_min_size),
        name: info.name,
        backend: info.backend.to_string(),
        device_type: info.device_type,
        features,
    }
}

impl GpuContext {
    /// The adapter as reported, with its backend (browsers may hide its name).
    pub fn adapter_label(&self) -> String {
        match self.adapter.name.as_str() {
            "" => format!("{} adapter", self.adapter.backend),
            name => format!("{name} ({})", self.adapter.backend),
        }
    }

    /// Open the best adapter (the one `POCKETRT_ADAPTER` names, else the best of
    /// `POCKETRT_BACKEND`'s backends, else of any) with the limits `need` asks for.
    pub async fn open(need: LimitsNeeded) -> Result<GpuContext> {
        let instance = instance()?;
        let adapter = match adapter_by_name(&instance).await? {
            Some(a) => a,
            None => instance
                .request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    ..Default::default()
                })
                .await
                .map_err(|e| Error::NoGpuAdapter {
                    detail: e.to_string(),
                })?,
        };
        let summary = summarize(&instance, &adapter);
        let available = adapter.features();
        let wanted =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP;
        let limits = limits_for(need, &adapter.limits())?;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("pocketrt"),
                required_features: available & wanted,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::GpuDevice(e.to_string()))?;
        let errors: std::sync::Arc<std::sync::Mutex<Vec<Reported>>> = Default::default();
        let sink = errors.clone();
        device.on_uncaptured_error(std::sync::Arc::new(move |e: wgpu::Error| {
            if let Ok(mut list) = sink.lock() {
                let fatal = !matches!(e, wgpu::Error::Validation { .. });
                list.push(Reported {
                    fatal,
                    message: e.to_string(),
                });
            }
        }));
        let lost: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
        let sink = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut why) = sink.lock() {
                let reason = match reason {
                    wgpu::DeviceLostReason::Destroyed => "destroyed",
                    _ => "lost",
                };
                *why = Some(match message.is_empty() {
                    true => reason.to_string(),
                    false => format!("{reason}: {message}"),
                });
            }
        });
        Ok(GpuContext {
            device,
            queue,
            adapter: summary,
            limits,
            allocated: Default::default(),
            errors,
            lost,
            pipelines: Default::default(),
        })
    }

    /// The same device, queue and pipelines, its allocations counted apart (a model
    /// of another profile beside this one's: tests, the tuner's candidates).
    pub fn counted_apart(&self) -> GpuContext {
        GpuContext {
            device: self.device.clone(),
            queue: self.queue.clone(),
            adapter: self.adapter.clone(),
            limits: self.limits.clone(),
            allocated: Default::default(),
            errors: self.errors.clone(),
            lost: self.lost.clone(),
            pipelines: self.pipelines.clone(),
        }
    }

    /// Pipelines compiled on this device so far (`gpu::pipeline_cache`).
    pub fn compiled_pipelines(&self) -> usize {
        self.pipelines.len()
    }

    /// Each pipeline compiled on this device: its label and storage buffers, most first.
    pub fn pipelines_storage_buffers(&self) -> Vec<(String, usize)> {
        self.pipelines.storage_buffers()
    }

    /// Why the device was lost (`device.lost`, `Device::destroy`), once it is.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().ok()?.clone()
    }

    /// The first error the device reported since the last check, as a typed error: a
    /// lost device, out of memory or an internal error is [`Error::GpuLost`] (the model
    /// must be loaded again), a validation error [`Error::Gpu`].
    pub fn check_errors(&self) -> Result<()> {
        if let Some(why) = self.lost() {
            return Err(Error::GpuLost(why));
        }
        let mut list = self
            .errors
            .lock()
            .map_err(|_| Error::Gpu("the GPU error log is poisoned".into()))?;
        let first = list.drain(..).next();
        match first {
            None => Ok(()),
            Some(e) if e.fatal => Err(Error::GpuLost(e.message)),
            Some(e) => Err(Error::Gpu(e.message)),
        }
    }

    /// The error of a readback that failed to map: the buffers are ours and never
    /// destroyed while mapped, so the device is gone ([`Error::GpuLost`], with why when
    /// the device said).
    pub(crate) fn map_failed(&self, e: impl std::fmt::Display) -> Error {
        match self.lost() {
            Some(why) => Error::GpuLost(why),
            None => Error::GpuLost(format!("a readback failed to map ({e})")),
        }
    }

    /// The error of a failed wait for the GPU: the device's loss where it is lost.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn poll_failed(&self, e: impl std::fmt::Display) -> Error {
        match self.lost() {
            Some(why) => Error::GpuLost(why),
            None => Error::Gpu(format!("waiting for the GPU: {e}")),
        }
    }

    /// Check that a buffer bound whole as storage, of `bytes`, fits this device.
    pub fn check_binding(&self, what: &str, bytes: u64) -> Result<()> {
        for (limit, available) in [
            ("max_buffer_size", self.limits.max_buffer_size),
            (
                "max_storage_buffer_binding_size",
                self.limits.max_storage_buffer_binding_size,
            ),
        ] {
            if bytes > available {
                return Err(Error::ExceedsDeviceLimits {
                    what: what.into(),
                    limit,
                    needed: bytes,
                    available,
                });
            }
        }
        Ok(())
    }
}
