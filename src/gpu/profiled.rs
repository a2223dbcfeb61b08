//! A device with the designs chosen for it: the [`GpuContext`] (device, queue, adapter,
//! limits, compiled pipelines) and the [`DeviceProfile`] the model's kernels are built
//! by. The device knows no design; what holds a model, plans it or tunes it holds this,
//! and hands each kernel constructor the values of the profile that it needs.

use super::device::{GpuContext, LimitsNeeded};
use super::profile::DeviceProfile;
use crate::error::Result;
use std::sync::Arc;

/// A [`GpuContext`] in a [`DeviceProfile`]; it reads as the context (`Deref`), so that
/// buffers and kernels take it where they take the device.
pub struct ProfiledContext {
    /// The device. Contexts in another profile for the same model share it (and its
    /// count of allocated bytes: [`ProfiledContext::tuned_to`]).
    pub gpu: Arc<GpuContext>,
    /// Every kernel design the engine uses on this device (`gpu::profile`).
    pub profile: DeviceProfile,
}

impl std::ops::Deref for ProfiledContext {
    type Target = GpuContext;
    fn deref(&self) -> &GpuContext {
        &self.gpu
    }
}

/// The profile `POCKETRT_PROFILE` names (native only; the web passes it as a load option).
pub fn profile_from_env() -> Option<String> {
    #[cfg(not(target_arch = "wasm32"))]
    if let Ok(name) = std::env::var(super::profile::PROFILE_ENV) {
        return Some(name).filter(|n| !n.trim().is_empty());
    }
    None
}

/// Every adapter of `POCKETRT_BACKEND`'s backends (else all), as "name (backend, type)",
/// with the profile it gets (`POCKETRT_PROFILE`'s where set and it fits, else detected).
#[cfg(not(target_arch = "wasm32"))]
pub fn list_adapters() -> Result<Vec<(String, Result<DeviceProfile>)>> {
    let forced = profile_from_env();
    Ok(super::device::list_adapters()?
        .into_iter()
        .map(|(label, summary)| (label, DeviceProfile::choose(forced.as_deref(), &summary)))
        .collect())
}

impl ProfiledContext {
    /// `gpu` in `profile`.
    pub fn new(gpu: Arc<GpuContext>, profile: DeviceProfile) -> ProfiledContext {
        ProfiledContext { gpu, profile }
    }

    /// Open the best adapter ([`GpuContext::open`]) with the limits `need` asks for, in
    /// the profile `POCKETRT_PROFILE` names or else the one detected.
    pub async fn open(need: LimitsNeeded) -> Result<ProfiledContext> {
        Self::open_in(need, profile_from_env().as_deref()).await
    }

    /// [`ProfiledContext::open`] in the profile called `profile` (`None`: detected); an
    /// error naming what the adapter lacks where it cannot run that profile.
    // On wasm the device is one thread's (WebGPU's handles are not `Send`): an `Arc` all
    // the same, as natively, where contexts cross threads.
    #[allow(clippy::arc_with_non_send_sync)]
    pub async fn open_in(need: LimitsNeeded, profile: Option<&str>) -> Result<ProfiledContext> {
        let gpu = GpuContext::open(need).await?;
        let profile = DeviceProfile::choose(profile, &gpu.adapter)?;
        Ok(Self::new(Arc::new(gpu), profile))
    }

    /// [`ProfiledContext::open`], blocking (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_blocking(need: LimitsNeeded) -> Result<ProfiledContext> {
        pollster::block_on(Self::open(need))
    }

    /// The same device and queue in the profile called `name` (tests run every profile
    /// on one device; allocations are counted apart).
    pub fn with_profile(&self, name: &str) -> Result<ProfiledContext> {
        let profile = DeviceProfile::named(name, &self.adapter)?;
        Ok(self.with_device_profile(profile))
    }

    /// The same device in `profile` (the tuner's candidates), its allocations counted
    /// apart.
    #[allow(clippy::arc_with_non_send_sync)]
    pub fn with_device_profile(&self, profile: DeviceProfile) -> ProfiledContext {
        Self::new(Arc::new(self.gpu.counted_apart()), profile)
    }

    /// The same device in `profile` (the tuner's choice) for the model whose weights this
    /// context uploaded: allocations counted together with this context's.
    pub fn tuned_to(&self, profile: DeviceProfile) -> ProfiledContext {
        Self::new(self.gpu.clone(), profile)
    }
}
