//! The device profile: every kernel design the engine picks for one adapter, in one plain
//! struct, decided in one place ([`DeviceProfile::detect`]), held with the device by the
//! model (`gpu::profiled`). Kernel wrappers are handed the values of it they need and never
//! look at the adapter's kind; this file is the only one that does (device type, subgroup width, and — where a browser hides the device
//! type — the names of software adapters).
//!
//! Four named profiles, each forceable on any adapter that has what it needs
//! (`POCKETRT_PROFILE=NAME` natively, the `profile` load option on the web):
//! - `gpu`: real GPUs (what Safari, Chrome and native Metal / Vulkan / DX12 users get):
//!   GEMVs of several rows per workgroup with a workgroup-memory reduction, a workgroup
//!   per (KV head, split) computing its whole GQA group for decode attention, with W_o
//!   folded in as one part per KV head (2 in Pocket, against 14 per q head for the
//!   workgroup design's fold, which the gate/up GEMV's every workgroup re-reads) spread
//!   over (KV head, block of W_o rows) workgroups, so that 2 KV heads still fill the
//!   device ([`WoBlocks`]; 4 dispatches per layer; whether it beats the O GEMV awaits a
//!   real-GPU measurement: `gpu-check` times decode with the fold on and off),
//!   register-tiled prefill GEMM workgroups (32 × 32 in f32, or 64 × 64 staged in f16
//!   where the adapter has `shader-f16`) and key tiles for prefill attention. Needs no
//!   optional feature.
//! - `gpu-subgroups`: `gpu` with each GEMV row slot one subgroup (`subgroupAdd`): GPUs
//!   with one fixed subgroup width (natively; browsers expose none through wgpu).
//! - `lavapipe`: CPU adapters with 8-wide subgroups (Mesa's lavapipe): the codes read from
//!   textures in tile order, the barrier-free "lanes" designs, x loads and the W_o fold
//!   through the subgroup.
//! - `swiftshader`: other CPU adapters (SwiftShader, WARP): the lanes designs reading the
//!   codes from a row-major texture, W_o as a GEMV of its own.
//!
//! Why each adapter gets its design, with the measurements behind it, is in
//! docs/ARCHITECTURE.md ("Device profiles").

use super::device::AdapterSummary;
use super::kernels::common::attention::AttentionVariant;
use super::kernels::common::attention::{WoBlocks, WoFold};
use super::kernels::common::attention_prefill::AttentionPrefillVariant;
use super::kernels::common::gemm::{GemmTiles, GemmVariant};
use super::kernels::common::gemv_spec::{GemvVariant, GpuRows, SlotReduce, TextureOrder};
use super::kernels::common::rope_kv::HeadShape;
use super::kernels::soft::gemm_q4_lanes::tokens_for_limit;
use super::kernels::MatrixFormat;

mod designs;
use crate::error::{Error, Result};
pub use designs::{GemvDesigns, Q8Designs, TopKDesign};

/// The profiles that can be forced by name.
pub const PROFILE_NAMES: [&str; 4] = ["gpu", "gpu-subgroups", "lavapipe", "swiftshader"];

/// The environment variable that forces a profile natively.
pub const PROFILE_ENV: &str = "POCKETRT_PROFILE";

/// Subgroup width the subgroup loaders and the lanes W_o fold are written for.
const LANES_SUBGROUP: u32 = 8;

/// Positions per decode-attention split on GPUs: short, so that heads × splits
/// workgroups fill the device.
pub const GPU_SPLIT_LEN: usize = 256;

/// The shortest split any profile or tuned design uses (it sizes the partial-results
/// buffer and the memory plan): on a large GPU short splits fill it at short histories.
pub const GPU_MIN_SPLIT_LEN: usize = 64;

/// Most tokens per prefill chunk (and submit), any profile.
pub const PREFILL_CHUNK: usize = 256;

/// Every choice of kernel design the engine makes on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceProfile {
    /// One of [`PROFILE_NAMES`].
    pub name: &'static str,
    /// Forced by name rather than detected.
    pub forced: bool,
    /// A CPU-emulated adapter: `backend: auto` times the CPU backend against it.
    pub software: bool,
    /// Decode GEMVs, per matrix role.
    pub gemv: GemvDesigns,
    /// The decode matrices' codes kept again as textures, in this order (the texture
    /// GEMVs and the lanes GEMM read them; `None`: storage buffers only).
    pub code_textures: Option<TextureOrder>,
    /// Decode attention.
    pub attention: AttentionVariant,
    /// Positions per decode-attention split.
    pub split_len: usize,
    /// W_o folded into decode attention (4 dispatches per layer instead of 5) where the
    /// head shape allows ([`DeviceProfile::folds`]).
    pub fold_output: bool,
    /// How the group attention spreads a folded W_o over workgroups.
    pub wo_blocks: WoBlocks,
    /// Prefill GEMM.
    pub gemm: GemmVariant,
    /// Prefill attention.
    pub prefill_attention: AttentionPrefillVariant,
    /// Most tokens per prefill chunk.
    pub prefill_chunk: usize,
    /// Batched prefill beats token-by-token decode steps here.
    pub batched_prefill: bool,
    /// The subgroup width the kernels use (`None`: no subgroup operations).
    pub subgroup_size: Option<u32>,
    /// f16 arithmetic in kernels (the KV cache is f16 in every profile, packed in u32).
    pub shader_f16: bool,
    /// GPU top-k.
    pub topk: TopKDesign,
    /// The designs for Q8 g32 matrices.
    pub q8: Q8Designs,
    /// WGSL's packed 4x8 builtins (`unpack4xU8`) compile here (the adapter's
    /// `packed_4x8`); else every shader gets them polyfilled by shifts and masks
    /// (`kernels::common::wgsl_compat::wgsl_for`: Safari).
    pub packed_4x8: bool,
}

impl DeviceProfile {
    /// The profile of `adapter`: by device type and subgroup width, with the names of
    /// software adapters for browsers that report neither.
    pub fn detect(adapter: &AdapterSummary) -> DeviceProfile {
        let name = match (is_software(adapter), gpu_subgroup_width(adapter)) {
            (false, Some(_)) => "gpu-subgroups",
            (false, None) => "gpu",
            (true, _) if adapter.subgroup_size == Some(LANES_SUBGROUP) => "lavapipe",
            (true, _) => "swiftshader",
        };
        Self::build(name, adapter).expect("a detected profile fits its adapter")
    }

    /// The profile called `name` on `adapter`; an error naming what is missing when the
    /// adapter lacks something it needs.
    pub fn named(name: &str, adapter: &AdapterSummary) -> Result<DeviceProfile> {
        let mut p = Self::build(name, adapter)?;
        p.forced = true;
        Ok(p)
    }

    /// `forced` (a name) or the detected profile.
    pub fn choose(forced: Option<&str>, adapter: &AdapterSummary) -> Result<DeviceProfile> {
        match forced.map(str::trim).filter(|n| !n.is_empty()) {
            Some(name) => Self::named(name, adapter),
            None => Ok(Self::detect(adapter)),
        }
    }

    fn build(name: &str, adapter: &AdapterSummary) -> Result<DeviceProfile> {
        // The GEMVs keep x in f32 even with shader-f16: the f16 lanes' logits are ~2e-3
        // (relative) from the oracle, enough to change seeded sampled tokens against the
        // CPU backend, and their speed is unmeasured on a real GPU (`gpu-check` times
        // both); `GpuRows::f16` turns them on.
        let gpu_rows = GPU_ROWS;
        let gpu = DeviceProfile {
            name: "gpu",
            forced: false,
            software: is_software(adapter),
            gemv: GemvDesigns::all(GemvVariant::GpuRows(gpu_rows)),
            code_textures: None,
            attention: AttentionVariant::Group,
            split_len: GPU_SPLIT_LEN,
            // Folded into the group design, one part per KV head (the gate/up GEMV adds 2
            // in Pocket), its rows over as many workgroups as the O GEMV's: 4 dispatches
            // per layer. Unmeasured on a real GPU against the O GEMV (`gpu-check` times
            // both); `fold_output: false` (or `bench --fold-output off`) turns it off.
            fold_output: true,
            wo_blocks: GPU_WO_BLOCKS,
            gemm: GemmVariant::WorkgroupTiles(gpu_gemm_tiles(adapter)),
            prefill_attention: AttentionPrefillVariant::KeyTiles,
            prefill_chunk: PREFILL_CHUNK,
            batched_prefill: true,
            subgroup_size: None,
            shader_f16: adapter.features.shader_f16,
            topk: TopKDesign::Radix,
            q8: Q8Designs {
                gemv: gpu_rows,
                gemm: gpu_gemm_tiles(adapter),
            },
            packed_4x8: adapter.features.packed_4x8,
        };
        // CPU adapters: no barriers or workgroup memory (the lanes designs), the codes
        // read from textures (several times faster than storage loads there), splits
        // twice as long (the lanes design runs its split serially per invocation).
        let soft = |name, order, gemv| DeviceProfile {
            name,
            shader_f16: false,
            gemv: GemvDesigns::all(gemv),
            code_textures: Some(order),
            attention: AttentionVariant::Lanes,
            split_len: 2 * GPU_SPLIT_LEN,
            gemm: GemmVariant::RowLanesFromTexture(order),
            prefill_attention: AttentionPrefillVariant::Lanes,
            q8: Q8Designs {
                gemv: SOFT_Q8_ROWS,
                gemm: GemmTiles::F32,
            },
            ..gpu
        };
        match name {
            "gpu" => Ok(gpu),
            "gpu-subgroups" => {
                let Some(width) = gpu_subgroup_width(adapter) else {
                    return Err(Error::InvalidArgument(format!(
                        "profile gpu-subgroups needs subgroups of one fixed width from 8 to \
                         {} (a GEMV row slot is one subgroup); adapter {:?} has {:?}: use `gpu`",
                        GPU_ROWS.invocations(),
                        adapter.name,
                        adapter.subgroup_size
                    )));
                };
                let rows = GpuRows {
                    tpr: width,
                    slots: GPU_ROWS.invocations() / width,
                    reduce: SlotReduce::Subgroup,
                    ..gpu_rows
                };
                Ok(DeviceProfile {
                    name: "gpu-subgroups",
                    gemv: GemvDesigns::all(GemvVariant::GpuRows(rows)),
                    subgroup_size: Some(width),
                    q8: Q8Designs {
                        gemv: rows,
                        ..gpu.q8
                    },
                    ..gpu
                })
            }
            "lavapipe" => {
                if adapter.subgroup_size != Some(LANES_SUBGROUP) {
                    return Err(Error::InvalidArgument(format!(
                        "profile lavapipe needs subgroups of {LANES_SUBGROUP} (its x loads \
                         and W_o fold go through them); adapter {:?} has {:?}: use \
                         `swiftshader` or `gpu`",
                        adapter.name, adapter.subgroup_size
                    )));
                }
                Ok(DeviceProfile {
                    subgroup_size: Some(LANES_SUBGROUP),
                    // W_o folds into the lanes attention through the 8-wide subgroups.
                    fold_output: true,
                    ..soft("lavapipe", TextureOrder::Tiles, GemvVariant::RowsFromTiles)
                })
            }
            "swiftshader" => Ok(DeviceProfile {
                fold_output: false,
                ..soft(
                    "swiftshader",
                    TextureOrder::RowMajor,
                    GemvVariant::RowsFromTexture,
                )
            }),
            other => Err(unknown_profile(other)),
        }
    }

    /// `name` as one of [`PROFILE_NAMES`] (surrounding space ignored), else the error
    /// listing them: for callers that check a name before any adapter is open (the web
    /// load options, so that a misspelt name fails on every backend).
    pub fn check_name(name: &str) -> Result<&'static str> {
        let name = name.trim();
        PROFILE_NAMES
            .into_iter()
            .find(|n| *n == name)
            .ok_or_else(|| unknown_profile(name))
    }

    /// The decode attention design for `shape`, with W_o folded in or not: the profile's,
    /// except where it cannot run the shape (the lanes and group designs: head_dim % 4; the
    /// group design: a group that fits workgroup memory) or fold it (the lanes design
    /// without its subgroups): the workgroup design then.
    pub fn attention_for(&self, shape: HeadShape, fold: bool) -> AttentionVariant {
        let fits = self.attention.fits(shape, fold);
        match self.attention {
            AttentionVariant::Lanes if fits && (!fold || self.lanes_fold()) => {
                AttentionVariant::Lanes
            }
            AttentionVariant::Group if fits => AttentionVariant::Group,
            _ => AttentionVariant::Workgroup,
        }
    }

    /// Does the decode step fold W_o into attention for `shape` when asked to? Where the
    /// heads allow it ([`WoFold::can_fold`]); on the GPU profiles only through
    /// the group design (a part per KV head): where it cannot run the shape, W_o stays a
    /// GEMV rather than the workgroup design's part per q head.
    pub fn folds(&self, shape: HeadShape) -> bool {
        WoFold::can_fold(shape)
            && (self.attention != AttentionVariant::Group
                || self.attention_for(shape, true) == AttentionVariant::Group)
    }

    /// Does the lanes attention fold W_o here (through 8-wide subgroups)?
    pub fn lanes_fold(&self) -> bool {
        self.subgroup_size == Some(LANES_SUBGROUP)
    }

    /// The decode GEMV design of a role whose Q4 design is `q4` for a matrix in `format`:
    /// that one, or the profile's Q8 design.
    pub fn gemv_in(&self, q4: GemvVariant, format: MatrixFormat) -> GemvVariant {
        match format {
            MatrixFormat::Q4 => q4,
            MatrixFormat::Q8 => GemvVariant::GpuRows(self.q8.gemv),
        }
    }

    /// The prefill GEMM design for K inputs of a matrix in `format` under a uniform
    /// binding limit of `max_uniform` bytes: the profile's (its Q8 design for Q8), but
    /// workgroup tiles where the lanes design's token rows do not fit a uniform binding.
    pub fn gemm_for(&self, k: usize, max_uniform: u64, format: MatrixFormat) -> GemmVariant {
        if format == MatrixFormat::Q8 {
            return GemmVariant::WorkgroupTiles(self.q8.gemm);
        }
        match self.gemm {
            g if g.is_lanes() && tokens_for_limit(max_uniform, k).is_none() => {
                GemmVariant::WorkgroupTiles(GemmTiles::F32)
            }
            g => g,
        }
    }

    /// Every choice as JSON (bench --json, gpu-check, the web `info`).
    pub fn to_json(&self) -> serde_json::Value {
        let gemv: serde_json::Map<String, serde_json::Value> = self
            .gemv
            .roles()
            .iter()
            .map(|(role, v)| (role.to_string(), v.name().into()))
            .collect();
        serde_json::json!({
            "name": self.name,
            "forced": self.forced,
            "software": self.software,
            "gemv": gemv,
            "code_textures": self.code_textures.map(TextureOrder::name),
            "attention": self.attention.name(),
            "split_len": self.split_len,
            "fold_output": self.fold_output,
            "wo_blocks": format!("{}x{}", self.wo_blocks.rows, self.wo_blocks.lanes),
            "gemm": self.gemm.name(),
            "gemm_tiles": self.gemm.tiles().map(GemmTiles::label),
            "prefill_attention": self.prefill_attention.name(),
            "prefill_chunk": self.prefill_chunk,
            "batched_prefill": self.batched_prefill,
            "subgroup_size": self.subgroup_size,
            "shader_f16": self.shader_f16,
            "wgsl_packed_4x8": self.packed_4x8,
            "topk": "radix",
            "q8": {
                "gemv": format!("gpu_rows/{}", self.q8.gemv.label()),
                "gemm": format!("tiles/{}", self.q8.gemm.label()),
            },
        })
    }
}

impl std::fmt::Display for DeviceProfile {
    /// One line: `profile gpu (detected): gemv qkv=workgroup …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.forced { "forced" } else { "detected" };
        write!(f, "profile {} ({how}): gemv", self.name)?;
        for (role, v) in self.gemv.roles() {
            write!(f, " {role}={}", v.name())?;
        }
        let textures = self.code_textures.map_or("none", TextureOrder::name);
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        let subgroups = self
            .subgroup_size
            .map_or("none".to_string(), |s| s.to_string());
        write!(
            f,
            ", code textures {textures}, attention {} split {} fold W_o {}, prefill gemm {} \
             attention {} chunk {} batched {}, subgroups {subgroups}, f16 {}, topk radix, q8 gemv gpu_rows/{} gemm tiles/{}",
            self.attention.name(),
            self.split_len,
            yes_no(self.fold_output),
            self.gemm.label(),
            self.prefill_attention.name(),
            self.prefill_chunk,
            yes_no(self.batched_prefill),
            yes_no(self.shader_f16),
            self.q8.gemv.label(),
            self.q8.gemm.label(),
        )?;
        match self.packed_4x8 {
            true => Ok(()),
            false => write!(f, ", unpack4xU8 polyfilled"),
        }
    }
}

/// The GPU GEMV's layout: 8 row slots of 16 lanes (128 invocations), 2 rows per slot (x
/// reused across them), 16 rows per workgroup; the slot's lanes summed by a tree in
/// workgroup memory; x in f32. A starting point from the public designs (ggml-webgpu, onnxruntime),
/// to be tuned per GPU with `scripts/gpu-check`.
const GPU_ROWS: GpuRows = GpuRows {
    tpr: 16,
    slots: 8,
    rps: 2,
    reduce: SlotReduce::Tree,
    f16: false,
    x_shared: false,
};

/// The CPU adapters' Q8 GEMV layout: one lane per row (no reduction across lanes), 8
/// rows per lane reusing each x load, 64 lanes. Measured on lavapipe (the coder's Q8
/// decode, tok/s with prefill): 1 × 64 × 8 gave 3.6–5.1, 8 × 16 × 2 (the GPU layout) 0.8,
/// 1 × 64 × 2 2.3, 4 × 16 × 4 2.1, 1 × 16 × 8 3.5.
const SOFT_Q8_ROWS: GpuRows = GpuRows {
    tpr: 1,
    slots: 64,
    rps: 8,
    reduce: SlotReduce::Tree,
    f16: false,
    x_shared: false,
};

/// The group attention's folded W_o on GPUs: blocks of 32 rows (Pocket's 896 rows: 28
/// blocks per KV head, 56 workgroups, as many as the O GEMV's 16-row workgroups), 8
/// lanes per row reading neighbouring code words. A starting point, to be tuned per GPU
/// with `scripts/gpu-check`.
const GPU_WO_BLOCKS: WoBlocks = WoBlocks { rows: 32, lanes: 8 };

/// The GPU profiles' prefill GEMM tiles: staged in f16 where the adapter has `shader-f16`
/// (half the workgroup memory per value: 64 × 64 tiles in the 16 KiB every adapter
/// gives), f32 32 × 32 elsewhere. Starting points from ggml-webgpu and onnxruntime, to be
/// tuned per GPU with `scripts/gpu-check`.
fn gpu_gemm_tiles(adapter: &AdapterSummary) -> GemmTiles {
    if adapter.features.shader_f16 {
        GemmTiles::F16
    } else {
        GemmTiles::F32
    }
}

/// The subgroup width a GPU GEMV row slot can be: one fixed width from 8 to the GEMV's
/// workgroup size, a power of two (NVIDIA and Apple 32; lavapipe 8, for the tests).
fn gpu_subgroup_width(adapter: &AdapterSummary) -> Option<u32> {
    adapter
        .subgroup_size
        .filter(|w| w.is_power_of_two() && (8..=GPU_ROWS.invocations()).contains(w))
}

fn unknown_profile(name: &str) -> Error {
    Error::InvalidArgument(format!(
        "unknown device profile {name:?} (profiles: {})",
        PROFILE_NAMES.join(", ")
    ))
}

/// A CPU-emulated adapter: the device type says so natively (and on the web, where
/// `isFallbackAdapter` maps to it); browsers that hide it still name the adapter.
fn is_software(adapter: &AdapterSummary) -> bool {
    let name = adapter.name.to_ascii_lowercase();
    adapter.device_type == wgpu::DeviceType::Cpu
        || ["swiftshader", "llvmpipe", "lavapipe", "warp", "software"]
            .iter()
            .any(|s| name.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::device::OptionalFeatures;

    fn adapter(name: &str, device_type: wgpu::DeviceType, subgroup: Option<u32>) -> AdapterSummary {
        AdapterSummary {
            name: name.into(),
            backend: "vulkan".into(),
            device_type,
            features: OptionalFeatures {
                timestamp_query: true,
                shader_f16: true,
                subgroups: subgroup.is_some(),
                packed_4x8: true,
            },
            subgroup_size: subgroup,
        }
    }

    #[test]
    fn discrete_and_integrated_gpus_get_the_gpu_profile() {
        for (name, ty, sg) in [
            ("AMD Radeon (RADV)", wgpu::DeviceType::DiscreteGpu, None), // widths 32 to 64
            ("Apple M4", wgpu::DeviceType::IntegratedGpu, None),
            ("", wgpu::DeviceType::Other, None), // Safari: no name, no device type
        ] {
            let p = DeviceProfile::detect(&adapter(name, ty, sg));
            assert_eq!(p.name, "gpu", "{name}");
            assert!(!p.software && !p.forced);
            assert_eq!(p.gemv, GemvDesigns::all(GemvVariant::GpuRows(GPU_ROWS)));
            assert_eq!(GPU_ROWS.reduce, SlotReduce::Tree);
            assert_eq!(p.attention, AttentionVariant::Group);
            assert_eq!(p.gemm, GemmVariant::WorkgroupTiles(GemmTiles::F16));
            assert!(p.shader_f16, "the test adapters have shader-f16");
            assert_eq!(p.prefill_attention, AttentionPrefillVariant::KeyTiles);
            assert_eq!((p.code_textures, p.split_len), (None, GPU_SPLIT_LEN));
            assert!(p.fold_output && p.batched_prefill);
            assert_eq!(p.wo_blocks, GPU_WO_BLOCKS);
        }
    }

    #[test]
    fn gpus_with_one_subgroup_width_get_subgroup_row_slots() {
        for (name, width) in [("NVIDIA H200", 32), ("Apple M4 (Metal)", 32), ("Intel", 16)] {
            let a = adapter(name, wgpu::DeviceType::DiscreteGpu, Some(width));
            let p = DeviceProfile::detect(&a);
            assert_eq!(
                (p.name, p.subgroup_size),
                ("gpu-subgroups", Some(width)),
                "{name}"
            );
            let GemvVariant::GpuRows(rows) = p.gemv.qkv else {
                panic!("{name}: {:?}", p.gemv)
            };
            assert_eq!(
                (rows.tpr, rows.reduce),
                (width, SlotReduce::Subgroup),
                "{name}"
            );
            assert_eq!(rows.invocations(), GPU_ROWS.invocations());
            let gpu = DeviceProfile::named("gpu", &a).unwrap();
            assert_eq!(
                (p.attention, p.gemm),
                (gpu.attention, gpu.gemm),
                "only the GEMV differs"
            );
        }
        // Widths the row slot cannot be: refused by name, `gpu` detected.
        for width in [None, Some(4), Some(512)] {
            let a = adapter("GPU", wgpu::DeviceType::DiscreteGpu, width);
            assert_eq!(DeviceProfile::detect(&a).name, "gpu");
            let e = DeviceProfile::named("gpu-subgroups", &a)
                .unwrap_err()
                .to_string();
            assert!(e.contains("fixed width"), "{e}");
        }
    }

    #[test]
    fn gpus_without_shader_f16_get_the_f32_gemm_tiles() {
        let mut a = adapter("Apple M4", wgpu::DeviceType::IntegratedGpu, None);
        a.features.shader_f16 = false;
        let p = DeviceProfile::detect(&a);
        assert_eq!(p.gemm, GemmVariant::WorkgroupTiles(GemmTiles::F32));
        assert!(!p.shader_f16);
        assert_eq!(p.to_json()["gemm_tiles"], "32x32/4x4/f32");
        // CPU adapters never stage in f16, whatever they expose.
        let lavapipe = adapter("llvmpipe", wgpu::DeviceType::Cpu, Some(8));
        assert!(!DeviceProfile::detect(&lavapipe).shader_f16);
    }

    #[test]
    fn lavapipe_gets_tiles_and_the_subgroup_lanes_designs() {
        let a = adapter(
            "llvmpipe (LLVM 15.0.6, 256 bits)",
            wgpu::DeviceType::Cpu,
            Some(8),
        );
        let p = DeviceProfile::detect(&a);
        assert_eq!(p.name, "lavapipe");
        assert!(p.software);
        assert_eq!(p.gemv, GemvDesigns::all(GemvVariant::RowsFromTiles));
        assert_eq!(p.code_textures, Some(TextureOrder::Tiles));
        assert_eq!(
            p.gemm,
            GemmVariant::RowLanesFromTexture(TextureOrder::Tiles)
        );
        assert_eq!(p.attention, AttentionVariant::Lanes);
        assert_eq!(p.prefill_attention, AttentionPrefillVariant::Lanes);
        assert_eq!((p.subgroup_size, p.split_len), (Some(8), 2 * GPU_SPLIT_LEN));
        assert!(p.fold_output && p.lanes_fold());
    }

    #[test]
    fn other_cpu_adapters_get_the_row_major_texture_and_no_fold() {
        for a in [
            adapter("SwiftShader Device (Subzero)", wgpu::DeviceType::Cpu, None),
            adapter(
                "Microsoft Basic Render Driver",
                wgpu::DeviceType::Cpu,
                Some(4),
            ),
            // A browser that reports a software adapter only by its name.
            adapter(
                "SwiftShader Device (Subzero)",
                wgpu::DeviceType::Other,
                None,
            ),
        ] {
            let p = DeviceProfile::detect(&a);
            assert_eq!(p.name, "swiftshader", "{}", a.name);
            assert!(p.software);
            assert_eq!(p.gemv, GemvDesigns::all(GemvVariant::RowsFromTexture));
            assert_eq!(p.code_textures, Some(TextureOrder::RowMajor));
            assert_eq!(p.attention, AttentionVariant::Lanes);
            assert!(!p.fold_output && !p.lanes_fold());
            assert_eq!(p.subgroup_size, None);
        }
    }

    #[test]
    fn forcing_a_profile_keeps_what_the_adapter_is_and_checks_what_it_needs() {
        let lavapipe = adapter("llvmpipe", wgpu::DeviceType::Cpu, Some(8));
        let p = DeviceProfile::choose(Some("gpu"), &lavapipe).unwrap();
        assert_eq!((p.name, p.forced, p.software), ("gpu", true, true));
        let p = DeviceProfile::choose(Some(" swiftshader "), &lavapipe).unwrap();
        assert_eq!(p.name, "swiftshader");
        assert_eq!(
            DeviceProfile::choose(None, &lavapipe).unwrap().name,
            "lavapipe"
        );
        let gpu = adapter("Apple M4", wgpu::DeviceType::IntegratedGpu, None);
        let e = DeviceProfile::named("lavapipe", &gpu)
            .unwrap_err()
            .to_string();
        assert!(e.contains("subgroups of 8"), "{e}");
        let e = DeviceProfile::named("fastest", &gpu)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("gpu, gpu-subgroups, lavapipe, swiftshader"),
            "{e}"
        );
        for name in PROFILE_NAMES {
            let p = DeviceProfile::named(name, &lavapipe).unwrap();
            assert_eq!(p.name, name);
            assert!(p
                .to_string()
                .starts_with(&format!("profile {name} (forced)")));
            assert_eq!(p.to_json()["name"], name);
        }
    }

    #[test]
    fn attention_and_gemm_fall_back_where_a_shape_does_not_fit_the_lanes_designs() {
        let lavapipe = adapter("llvmpipe", wgpu::DeviceType::Cpu, Some(8));
        let swift = adapter("SwiftShader", wgpu::DeviceType::Cpu, None);
        let shape = |head_dim| HeadShape {
            n_heads: 4,
            n_kv_heads: 2,
            head_dim,
            context: 16,
        };
        let p = DeviceProfile::detect(&lavapipe);
        assert_eq!(p.attention_for(shape(64), true), AttentionVariant::Lanes);
        assert_eq!(
            p.attention_for(shape(6), false),
            AttentionVariant::Workgroup
        );
        let s = DeviceProfile::detect(&swift);
        assert_eq!(s.attention_for(shape(64), false), AttentionVariant::Lanes);
        assert_eq!(
            s.attention_for(shape(64), true),
            AttentionVariant::Workgroup
        );
        assert_eq!(p.gemm_for(896, 65_536, MatrixFormat::Q4), p.gemm);
        assert_eq!(
            p.gemm_for(1 << 20, 65_536, MatrixFormat::Q4),
            GemmVariant::WorkgroupTiles(GemmTiles::F32)
        );
        // The gpu profile: the group design, folded or not, but the workgroup design for
        // head_dim % 4 != 0 and for groups too large for workgroup memory (32 heads of 128
        // per KV head), where W_o is then not folded (a part per q head costs the gate/up
        // GEMV more than the O GEMV saves).
        let g = DeviceProfile::named("gpu", &lavapipe).unwrap();
        assert_eq!(g.attention_for(shape(64), false), AttentionVariant::Group);
        assert_eq!(g.attention_for(shape(64), true), AttentionVariant::Group);
        assert!(g.folds(shape(64)) && p.folds(shape(64)) && s.folds(shape(64)));
        // head_dim 12: the group design runs it, no design folds it.
        assert_eq!(g.attention_for(shape(12), false), AttentionVariant::Group);
        assert!(!g.folds(shape(12)) && !p.folds(shape(12)));
        assert_eq!(
            g.attention_for(shape(6), false),
            AttentionVariant::Workgroup
        );
        let wide_group = HeadShape {
            n_heads: 32,
            n_kv_heads: 1,
            head_dim: 128,
            context: 16,
        };
        assert_eq!(
            g.attention_for(wide_group, false),
            AttentionVariant::Workgroup
        );
        assert!(!g.folds(wide_group), "no part per q head on GPUs");
        assert!(s.folds(wide_group), "the CPU adapters' workgroup fold");
        let pocket = HeadShape {
            n_heads: 14,
            n_kv_heads: 2,
            head_dim: 64,
            context: 32_768,
        };
        assert_eq!(g.attention_for(pocket, false), AttentionVariant::Group);
        assert_eq!(g.attention_for(pocket, true), AttentionVariant::Group);
        assert!(g.folds(pocket));
        assert_eq!(GPU_WO_BLOCKS.blocks(896), 28);
    }
}
