//! What ran is visible: each pipeline's label names its kernel and design (what wgpu's
//! validation errors and the per-kernel profile show), per device profile;
//! `POCKETRT_DUMP_WGSL=DIR` writes every assembled shader to DIR; and what the GPU
//! profiles' pipelines bind stays under WebGPU's default limits, with headroom.

mod gpu_common;

use gpu_common::profiles;
use pocketrt::format::open;
use pocketrt::gpu::tune::Tuned;
use pocketrt::gpu::{GpuModel, LimitsNeeded, ProfiledContext};
use std::path::PathBuf;
use std::sync::Arc;

fn fixture() -> PathBuf {
    fixture_of("qwen3")
}

fn fixture_of(arch: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(arch)
}

#[test]
fn step_profile_names_each_kernels_design_in_every_profile() {
    for ctx in profiles() {
        let name = ctx.profile.name;
        let model = GpuModel::load(ctx.clone(), &mut *open(&fixture()).unwrap(), 16).unwrap();
        let times = model.profile_step(1, 0, 1, 1).unwrap();
        let design = |kernel: &str| {
            let t = times.iter().find(|t| t.kernel == kernel);
            t.unwrap_or_else(|| panic!("{name}: no {kernel} in {times:?}"))
                .design
                .clone()
        };
        let (qkv, gate_up, attention) = match name {
            "gpu" => (
                "gemv_q4/gpu_rows/8x16x2/tree",
                "gemv_q4/gpu_rows/8x16x2/tree",
                "attention/group+wo",
            ),
            "gpu-subgroups" => (
                "gemv_q4/gpu_rows/16x8x2/subgroup",
                "gemv_q4/gpu_rows/16x8x2/subgroup",
                "attention/group+wo",
            ),
            "lavapipe" => (
                "gemv_q4/tiles/8x16/subgroup",
                "gemv_q4/tiles/8x8/subgroup",
                "attention_lanes/heads+wo",
            ),
            "swiftshader" => (
                "gemv_q4/texture/4x64",
                "gemv_q4/texture/4x32",
                "attention_lanes/heads",
            ),
            other => panic!("a profile this test does not know: {other}"),
        };
        assert_eq!(design("qkv"), qkv, "{name}");
        assert_eq!(design("gate_up"), gate_up, "{name}");
        assert_eq!(design("attention"), attention, "{name}");
        assert_eq!(
            times.iter().any(|t| t.kernel == "o"),
            !ctx.profile.fold_output,
            "{name}: an O GEMV exactly when W_o is not folded"
        );
    }
}

#[test]
fn dump_wgsl_writes_every_assembled_shader_named_by_its_label() {
    let dir = std::env::temp_dir().join(format!("pocketrt-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The other test of this binary may dump its pipelines meanwhile too: harmless.
    std::env::set_var("POCKETRT_DUMP_WGSL", &dir);
    let ctx = &profiles()[0];
    let model = GpuModel::load(ctx.clone(), &mut *open(&fixture()).unwrap(), 16);
    std::env::remove_var("POCKETRT_DUMP_WGSL");
    model.unwrap();
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    println!("{} files: {files:?}", files.len());
    let gemv = files
        .iter()
        .find(|f| f.starts_with("gemv_q4.gpu_rows.8x16x2.tree-") && f.ends_with(".wgsl"))
        .unwrap_or_else(|| panic!("no gemv_q4.gpu_rows dump in {files:?}"));
    let src = std::fs::read_to_string(dir.join(gemv)).unwrap();
    assert!(
        src.starts_with("// gemv_q4/gpu_rows/8x16x2/tree\n"),
        "{}",
        &src[..80]
    );
    assert!(src.contains("// override N = ") && src.contains("fn main("));
    // The prefill GEMM's label names its tiles: `gemm_q4/tiles/64x64/8x4/f16` with
    // shader-f16, `gemm_q4/tiles/32x32/4x4/f32` without.
    let gemm = format!("gemm_q4.{}", ctx.profile.gemm.label().replace('/', "."));
    for kernel in [
        "embed_q4",
        "attention.group+wo",
        "attention_group_combine+wo",
        "argmax",
        "topk.radix.chunks",
        "topk.radix.merge",
        &gemm,
    ] {
        assert!(
            files.iter().any(|f| f.starts_with(&format!("{kernel}-"))),
            "no {kernel} in {files:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 41, part 5: every pipeline of the GPU profiles (Safari runs `gpu`) binds at most
/// 7 storage buffers, one under WebGPU's default `maxStorageBuffersPerShaderStage` (8):
/// the models of every architecture (qwen2's biases), W_o folded and not, one split and
/// several, greedy decode (the head's fused argmax) and prefill. Each profile on a device of its own,
/// so that its pipeline cache holds its pipelines alone.
#[test]
fn gpu_profiles_leave_a_storage_buffer_of_headroom_in_every_pipeline() {
    const MOST: usize = 7;
    for name in ["gpu", "gpu-subgroups"] {
        let device = ProfiledContext::open_blocking(LimitsNeeded::default()).unwrap();
        let ctx = match device.with_profile(name) {
            Ok(ctx) => ctx,
            Err(e) if name == "gpu-subgroups" && device.profile.name != "lavapipe" => {
                println!("{name} not on {}: {e}", device.adapter.name);
                continue;
            }
            Err(e) => panic!("{name}: {e}"),
        };
        let own = Tuned::of(&ctx.profile).expect("a GPU profile has a tunable design");
        let unfolded = Tuned {
            fold_output: !own.fold_output,
            ..own
        };
        for design in [own, unfolded] {
            let ctx = Arc::new(ctx.tuned_to(design.apply(&ctx.profile)));
            for arch in ["qwen3", "qwen2", "llama"] {
                let src = &mut *open(&fixture_of(arch)).unwrap();
                let mut model = GpuModel::load(ctx.clone(), src, 600).unwrap();
                // One split, then several (the combine), greedy; a prefill chunk.
                model.decode(1, 0).unwrap();
                model.decode(1, 599).unwrap();
                model.prefill(&[1, 2, 3], 0).unwrap();
            }
        }
        let bindings = device.pipelines_storage_buffers();
        println!("{name}: {bindings:?}");
        assert!(bindings.len() > 10, "{name}: {bindings:?}");
        for (label, n) in &bindings {
            assert!(*n <= MOST, "{name}: {label} binds {n} storage buffers");
        }
    }
}
