//! Typed errors of the GPU engine: no adapter, unknown backend, limits the adapter lacks.
//! (One test per binary that touches the environment: env vars are process-wide.)

use pocketrt::gpu::device::{limits_for, parse_backends};
use pocketrt::gpu::{LimitsNeeded, ProfiledContext};
use pocketrt::Error;

#[test]
fn missing_adapter_and_bad_backend_are_typed_errors_naming_the_fix() {
    // Metal does not exist on Linux; on macOS DX12 does not: either way no adapter.
    let absent = if cfg!(target_os = "macos") {
        "dx12"
    } else {
        "metal"
    };
    std::env::set_var("POCKETRT_BACKEND", absent);
    match ProfiledContext::open_blocking(LimitsNeeded::default()) {
        Err(e @ Error::NoGpuAdapter { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("mesa-vulkan-drivers") && msg.contains("--backend cpu"),
                "{msg}"
            );
        }
        Err(e) => panic!("expected NoGpuAdapter, got {e}"),
        Ok(ctx) => panic!("got an adapter on {absent}: {:?}", ctx.adapter),
    }
    std::env::set_var("POCKETRT_BACKEND", "vulkan,glide");
    assert!(matches!(
        ProfiledContext::open_blocking(LimitsNeeded::default()),
        Err(Error::InvalidArgument(m)) if m.contains("glide")
    ));
    std::env::remove_var("POCKETRT_BACKEND");

    // POCKETRT_ADAPTER (the CLI's --adapter) picks by name, case-insensitively; an
    // unknown name is NoGpuAdapter listing the adapters there are.
    let default = ProfiledContext::open_blocking(LimitsNeeded::default()).unwrap();
    std::env::set_var("POCKETRT_ADAPTER", default.adapter.name.to_uppercase());
    let chosen = ProfiledContext::open_blocking(LimitsNeeded::default()).unwrap();
    assert_eq!(chosen.adapter.name, default.adapter.name);
    std::env::set_var("POCKETRT_ADAPTER", "no-such-gpu-9000");
    match ProfiledContext::open_blocking(LimitsNeeded::default()) {
        Err(e @ Error::NoGpuAdapter { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("no-such-gpu-9000") && msg.contains(&default.adapter.name),
                "{msg}"
            );
        }
        Err(e) => panic!("expected NoGpuAdapter, got {e}"),
        Ok(ctx) => panic!("got {:?}", ctx.adapter),
    }
    std::env::remove_var("POCKETRT_ADAPTER");
    assert_eq!(
        parse_backends("Vulkan, gl").unwrap(),
        wgpu::Backends::VULKAN | wgpu::Backends::GL
    );
}

#[test]
fn limits_stay_at_webgpu_defaults_unless_the_model_needs_more() {
    let defaults = wgpu::Limits::defaults();
    let mut adapter = defaults.clone();
    adapter.max_buffer_size = 1 << 32;
    adapter.max_storage_buffer_binding_size = 1 << 31;
    let small = LimitsNeeded {
        max_buffer: 1 << 20,
        max_storage_binding: 1 << 20,
    };
    assert_eq!(limits_for(small, &adapter).unwrap(), defaults);
    let big = LimitsNeeded {
        max_buffer: 300 << 20,
        max_storage_binding: 300 << 20,
    };
    let raised = limits_for(big, &adapter).unwrap();
    assert_eq!(raised.max_buffer_size, 300 << 20);
    assert_eq!(raised.max_storage_buffer_binding_size, 300 << 20);
    let huge = LimitsNeeded {
        max_buffer: 1 << 33,
        max_storage_binding: 1 << 20,
    };
    match limits_for(huge, &adapter) {
        Err(Error::ExceedsDeviceLimits {
            limit: "max_buffer_size",
            needed,
            available,
            ..
        }) => {
            assert_eq!((needed, available), (1 << 33, 1 << 32));
        }
        other => panic!("expected ExceedsDeviceLimits, got {other:?}"),
    }
}

#[test]
fn an_invalid_shader_is_a_typed_error_not_a_panic() {
    use pocketrt::gpu::kernels::{KernelPipeline, Slot};
    let ctx = ProfiledContext::open_blocking(LimitsNeeded::default()).unwrap();
    ctx.check_errors().unwrap();
    let _ = KernelPipeline::new(
        &ctx,
        "broken",
        "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }",
        &[Slot::Read],
        &[],
    );
    match ctx.check_errors() {
        Err(Error::Gpu(m)) => assert!(m.contains("broken"), "{m}"),
        other => panic!("expected a GPU error, got {other:?}"),
    }
    // Reported once: the device goes on.
    ctx.check_errors().unwrap();
}
