//! The prefill Q4 g64 GEMM's design for GPUs (shaders/gemm_q4.wgsl): register-tiled
//! workgroups, one quant group of x and of the dequantized weights staged in workgroup
//! memory per step (tile sizes and f16 from the profile, [`GemmTiles`]). `M` comes from
//! the chunk uniform, so one pipeline and bind group serve every chunk size. Q8 g32
//! matrices (`GemvSpec::format`) run it with their own weight staging
//! (shaders/gemm_q8_weights.wgsl) on every adapter. The CPU adapters' design is
//! `soft::gemm_q4_lanes`; `gpu::forward::designs` puts the two behind `GemmQ4`.

use super::common::gemm::{GemmBindings, GemmTiles};
use super::common::gemv_spec::GemvSpec;
use super::common::q4_codes::Codes;
use super::common::wgsl::{CHUNK_WGSL, GEMM_COMMON_WGSL, Q4_COMMON_WGSL, Q8_UNPACK_WGSL};
use super::{Dispatch, KernelPipeline, MatrixFormat, Slot, MAX_GROUPS_PER_DIM};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/gemm_q4.wgsl");
const TILES_F32_WGSL: &str = include_str!("../../../shaders/gemm_q4_f32.wgsl");
const TILES_F16_WGSL: &str = include_str!("../../../shaders/gemm_q4_f16.wgsl");
const Q4_WEIGHTS_WGSL: &str = include_str!("../../../shaders/gemm_q4_weights.wgsl");
const Q8_WEIGHTS_WGSL: &str = include_str!("../../../shaders/gemm_q8_weights.wgsl");

/// The workgroup-tiles design's checks and WGSL (the layout itself: `common::gemm`).
impl GemmTiles {
    /// An error unless the kernel can be built in this layout on `ctx`: whole register
    /// blocks, at most 256 invocations, each token row's x loads split evenly among
    /// `invocations / bm` invocations (a power of two up to 16), the code words of a
    /// step spread evenly, the workgroup memory within the device's limit, f16 only
    /// with `shader-f16`.
    pub fn check(self, ctx: &GpuContext) -> Result<()> {
        let GemmTiles {
            bm,
            bn,
            tm,
            tn,
            f16,
        } = self;
        let whole = tm > 0 && tn > 0 && tm <= 8 && tn <= 8 && bm % tm == 0 && bn % tn == 0;
        let wg = if whole { self.invocations() } else { 0 };
        let splits = bm > 0 && wg % bm == 0 && (wg / bm).is_power_of_two() && wg / bm <= 16;
        let fits = self.workgroup_bytes() <= ctx.limits.max_compute_workgroup_storage_size;
        let ok =
            whole && tn % 2 == 0 && (1..=256).contains(&wg) && splits && (8 * bn) % wg == 0 && fits;
        if !ok {
            return Err(Error::InvalidArgument(format!(
                "GEMM tiles {self:?}: tm, tn ≤ 8 dividing bm, bn; tn even; at most 256 \
                 invocations, a power of two up to 16 per token row, dividing 8 · bn; \
                 {} of {} bytes of workgroup memory",
                self.workgroup_bytes(),
                ctx.limits.max_compute_workgroup_storage_size
            )));
        }
        if f16 && !ctx.adapter.features.shader_f16 {
            return Err(Error::InvalidArgument(format!(
                "GEMM tiles {self:?} stage f16, and adapter {:?} has no shader-f16",
                ctx.adapter.name
            )));
        }
        Ok(())
    }

    /// The generated WGSL header: `enable f16;` when f16 (it must open the source), the
    /// layout's constants (WW: code words of a `format` matrix per invocation and step)
    /// and the staged element type `tv` with the Σx² accessors.
    fn wgsl(self, format: MatrixFormat) -> String {
        let wg = self.invocations();
        let consts = format!(
            "const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst TM: u32 = {}u;\n\
             const TN: u32 = {}u;\nconst WG: u32 = {wg}u;\nconst XS: u32 = {}u;\n\
             const WW: u32 = {}u;\n",
            self.bm,
            self.bn,
            self.tm,
            self.tn,
            wg / self.bm,
            words_per_row(format) * self.bn / wg
        );
        let elem = if self.f16 {
            TILES_F16_WGSL
        } else {
            TILES_F32_WGSL
        };
        [elem, &consts].concat()
    }
}

/// Code words of one tile row per 64-value step.
fn words_per_row(format: MatrixFormat) -> u32 {
    match format {
        MatrixFormat::Q4 => 8,
        MatrixFormat::Q8 => 16,
    }
}

/// The workgroup-tiles GEMM of one spec.
pub(crate) struct TilesGemm {
    kernel: KernelPipeline,
    pub tiles: GemmTiles,
    spec: GemvSpec,
}

/// A bound workgroup-tiles GEMM.
pub(crate) struct TilesDispatch {
    dispatch: Dispatch,
    tiles: GemmTiles,
    spec: GemvSpec,
}

impl TilesGemm {
    /// The GEMM of `spec` (checked by the caller) with its override values `constants`,
    /// in `tiles`.
    pub(crate) fn new(
        ctx: &GpuContext,
        spec: GemvSpec,
        constants: &[(&str, f64)],
        tiles: GemmTiles,
    ) -> Result<TilesGemm> {
        tiles.check(ctx)?;
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let weights = match spec.format {
            MatrixFormat::Q4 => Q4_WEIGHTS_WGSL,
            MatrixFormat::Q8 => &[Q8_UNPACK_WGSL, Q8_WEIGHTS_WGSL].concat(),
        };
        let header = tiles.wgsl(spec.format);
        let source = [
            &header,
            CHUNK_WGSL,
            Q4_COMMON_WGSL,
            GEMM_COMMON_WGSL,
            weights,
            WGSL,
        ];
        let label = format!("gemm_{}/tiles/{}", spec.format.name(), tiles.label());
        let kernel = KernelPipeline::new(ctx, &label, &source.concat(), &slots, constants);
        Ok(TilesGemm {
            kernel,
            tiles,
            spec,
        })
    }

    /// Bind `b` (the codes from storage) for up to `max_m` token rows.
    pub(crate) fn dispatch(
        &self,
        ctx: &GpuContext,
        b: &GemmBindings,
        max_m: usize,
    ) -> Result<TilesDispatch> {
        let Codes::Buffer(codes) = b.codes else {
            panic!("gemm_q4: the workgroup-tiles variant reads codes from storage");
        };
        let grid = tiles_grid(&self.spec, self.tiles, max_m)?;
        let norm = b.norm_weight.unwrap_or(b.x);
        let buffers = [b.chunk, codes, b.qparams, b.x, norm, b.bias, b.out];
        Ok(TilesDispatch {
            dispatch: self.kernel.dispatch(ctx, &buffers, grid[0] * grid[1]),
            tiles: self.tiles,
            spec: self.spec,
        })
    }
}

impl TilesDispatch {
    /// Encode the GEMM of `m` token rows.
    pub(crate) fn encode(&self, pass: &mut wgpu::ComputePass<'_>, m: usize) -> Result<()> {
        let grid = tiles_grid(&self.spec, self.tiles, m)?;
        self.dispatch.encode_grid(pass, grid);
        Ok(())
    }
}

/// The workgroup-tiles grid for `m` token rows: output tiles along x, token tiles along
/// y. An error when the grid exceeds the per-dimension limit.
fn tiles_grid(spec: &GemvSpec, tiles: GemmTiles, m: usize) -> Result<[u32; 3]> {
    let outs_per_tile = tiles.bn as usize / spec.epilogue.parts();
    let x = spec.n.div_ceil(outs_per_tile);
    let y = m.div_ceil(tiles.bm as usize);
    if x > MAX_GROUPS_PER_DIM as usize || y > MAX_GROUPS_PER_DIM as usize {
        return Err(Error::InvalidArgument(format!(
            "GEMM of {m} × {} needs a {x} × {y} grid, over the per-dimension limit",
            spec.n
        )));
    }
    Ok([x as u32, y as u32, 1])
}
