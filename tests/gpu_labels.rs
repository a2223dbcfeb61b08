//! What ran is visible: each pipeline's label names its kernel and design (what wgpu's
//! validation errors and the per-kernel profile show), per device profile; and
//! `POCKETRT_DUMP_WGSL=DIR` writes every assembled shader to DIR.

mod gpu_common;

use gpu_common::profiles;
use pocketrt::format::source::open;
use pocketrt::gpu::GpuModel;
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/qwen3")
}

#[test]
fn step_profile_names_each_kernels_design_in_every_profile() {
    for ctx in profiles() {
        let name = ctx.profile.name;
        let model = GpuModel::load(ctx.clone(), &mut *open(&fixture()).unwrap(), 16).unwrap();
        let times = model.profile_step(1, 0, 1).unwrap();
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
