//! The WebGPU device of the browser build: opened once and reused by later loads (a new
//! device per load costs seconds on some adapters), except once it is lost
//! (`ProfiledContext::lost`: `device.lost`, `device.destroy()`): the next load — `reload()` —
//! opens a new one.

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::gpu::plan::{Budget, MemoryPlan, TABLET_BUDGET};
use crate::gpu::weights::limits_needed;
use crate::gpu::{LimitsNeeded, ProfiledContext};
use std::sync::Arc;

thread_local! {
    /// The device of earlier loads, in its detected profile: reused (a new WebGPU device
    /// per load costs seconds on some adapters, and the old one lingers until garbage
    /// collection). A load forcing a profile gets this device and queue in that profile
    /// (`ProfiledContext::with_profile`), never a context of another profile.
    static DEVICE: std::cell::RefCell<Option<Arc<ProfiledContext>>> = const { std::cell::RefCell::new(None) };
}

/// Open a new device at the next load (`reload()`: the old one is lost, or about to be
/// reported so).
pub(super) fn forget() {
    DEVICE.with_borrow_mut(|d| *d = None);
}

/// The device, in the profile called `profile` (`None`: detected), and memory plan for
/// `context` positions of a model of `config` (holding Q8 g32 matrices when `q8`).
pub(super) async fn gpu_for(
    config: &ModelConfig,
    context: usize,
    profile: Option<&str>,
    q8: bool,
) -> Result<(Arc<ProfiledContext>, MemoryPlan)> {
    let ctx = device(limits_needed(config, context.max(1), q8), profile).await?;
    let budget = Budget {
        q8_weights: q8,
        ..Budget::for_device(TABLET_BUDGET, &ctx)
    };
    let plan = MemoryPlan::choose(config, Some(context), &budget)?;
    Ok((ctx, plan))
}

/// A device with at least the limits `need` asks for (the last one when it has them) in
/// the profile called `profile` (`None`: detected). A profile the adapter cannot run is an
/// `InvalidArgument` error saying what it lacks.
// `GpuModel` shares its device through an `Arc` (as natively); wasm has one thread.
#[allow(clippy::arc_with_non_send_sync)]
pub(super) async fn device(
    need: LimitsNeeded,
    profile: Option<&str>,
) -> Result<Arc<ProfiledContext>> {
    let fits = |c: &ProfiledContext| {
        need.max_buffer <= c.limits.max_buffer_size
            && need.max_storage_binding <= c.limits.max_storage_buffer_binding_size
    };
    let reusable = |c: &ProfiledContext| fits(c) && c.lost().is_none();
    let detected = match DEVICE.with_borrow(|d| d.clone()).filter(|c| reusable(c)) {
        Some(ctx) => ctx,
        None => {
            let ctx = Arc::new(ProfiledContext::open_in(need, None).await?);
            DEVICE.with_borrow_mut(|d| *d = Some(ctx.clone()));
            ctx
        }
    };
    match profile.map(str::trim).filter(|n| !n.is_empty()) {
        None => Ok(detected),
        Some(name) => Ok(Arc::new(detected.with_profile(name)?)),
    }
}

/// A Promise of the `GPUDeviceLostInfo` ({ reason, message }) of the device of `ctx`,
/// settled when it is lost.
pub(super) fn lost_promise(ctx: &ProfiledContext) -> Option<js_sys::Promise> {
    use wasm_bindgen::JsCast;
    let lost = ctx.device.as_webgpu()?.lost();
    Some(wasm_bindgen::JsValue::from(lost).unchecked_into())
}

/// `Err(NoWebGpu)` when the global scope has no `navigator.gpu`.
pub(super) fn require_webgpu() -> Result<()> {
    use js_sys::Reflect;
    let global = js_sys::global();
    let gpu = Reflect::get(&global, &"navigator".into())
        .and_then(|n| Reflect::get(&n, &"gpu".into()))
        .ok();
    match gpu {
        Some(g) if !g.is_undefined() && !g.is_null() => Ok(()),
        _ => Err(Error::NoWebGpu("navigator.gpu is missing".into())),
    }
}
