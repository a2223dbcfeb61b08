//! The GPU engine (wgpu): device, one typed wrapper per WGSL kernel, model weights on the
//! GPU, the KV cache, and the decode step.

pub mod buffers;
pub mod device;
pub mod forward;
pub mod kernels;
pub mod kv_cache;
pub mod oneshot;
pub mod pipeline_cache;
pub mod plan;
pub mod profile;
pub mod profiled;
pub mod stream_upload;
pub mod timing;
pub mod tune;
pub mod weights;

pub use device::{AdapterSummary, GpuContext, LimitsNeeded, OptionalFeatures};
pub use forward::{GpuModel, KernelTime};
/// The Q4 codes as textures (CPU adapters' profiles): kept at this path, it is the
/// model's memory as much as a kernel's.
pub use kernels::soft::code_texture;
pub use profile::DeviceProfile;
pub use profiled::ProfiledContext;

/// The per-step uniform every step-dependent kernel reads (`struct Step` in the shaders).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct StepUniform {
    /// The input token of this step.
    pub token: u32,
    /// Its position; the attention covers positions `0..=pos`.
    pub pos: u32,
    pub pad: [u32; 2],
}
