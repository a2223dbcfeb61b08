//! Q4 g64 GEMM for batched prefill: `Y[M×N] = X[M×K] · Wᵀ` (+ bias) over the chunk's
//! `M` token rows, with the GEMV's fused RMSNorm prologue and epilogues (store, residual
//! add, gate/up + SwiGLU). Two designs behind one wrapper, chosen per adapter as the GEMV
//! does: register-tiled workgroups on GPUs (shaders/gemm_q4.wgsl; tile sizes and f16 from
//! the profile, [`GemmTiles`]), and on CPU adapters,
//! where barriers and per-lane storage loads are slow, one row per invocation reusing
//! each weight across a tile of tokens read as uniforms (gemm_q4_lanes.rs). `M` comes
//! from the chunk uniform, so one pipeline and bind group serve every chunk size. Q8 g32
//! matrices (`GemvSpec::format`) run the workgroup tiles, with their own weight staging
//! (shaders/gemm_q8_weights.wgsl), on every adapter.

use super::gemv_q4::{Codes, GemvSpec, TextureOrder, XLoads, Q4_COMMON_WGSL, Q8_UNPACK_WGSL};
use super::soft::gemm_q4_lanes::{Bindings, LanesDispatch, LanesGemm, TOKENS};
use super::{Dispatch, KernelPipeline, MatrixFormat, Slot, MAX_GROUPS_PER_DIM};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/gemm_q4.wgsl");
const TILES_F32_WGSL: &str = include_str!("../../../shaders/gemm_q4_f32.wgsl");
const TILES_F16_WGSL: &str = include_str!("../../../shaders/gemm_q4_f16.wgsl");
const Q4_WEIGHTS_WGSL: &str = include_str!("../../../shaders/gemm_q4_weights.wgsl");
const Q8_WEIGHTS_WGSL: &str = include_str!("../../../shaders/gemm_q8_weights.wgsl");
pub(super) const COMMON_WGSL: &str = include_str!("../../../shaders/gemm_q4_common.wgsl");
/// The prefill chunk uniform, prepended to the prefill kernels.
pub(crate) const CHUNK_WGSL: &str = include_str!("../../../shaders/chunk.wgsl");

/// The most token rows per tile of the row-lanes variant: x buffers hold whole tiles,
/// so buffers of a multiple of this many rows suit every GEMM ([`GemmQ4::x_rows`]).
pub const MAX_LANE_TOKENS: usize = TOKENS;

/// The chunk uniform every prefill kernel reads (`struct Chunk` in shaders/chunk.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ChunkUniform {
    /// Position of the chunk's first token in the sequence.
    pub start: u32,
    /// Tokens in the chunk (the GEMM's M).
    pub count: u32,
    pub pad: [u32; 2],
}

/// Which kernel design computes the GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmVariant {
    /// Register-tiled workgroups, x and the dequantized weights staged in workgroup
    /// memory: the design for real GPUs.
    WorkgroupTiles(GemmTiles),
    /// Rows per invocation, each weight reused across a tile of tokens read from uniform
    /// bindings, no barriers, the codes read from their texture copy in this order (the
    /// copy the decode GEMV reads): the design for CPU adapters
    /// (`soft::gemm_q4_lanes`).
    RowLanesFromTexture(TextureOrder),
}

impl GemmVariant {
    /// Its name in profiles and pipeline labels.
    pub fn name(self) -> &'static str {
        match self {
            GemmVariant::WorkgroupTiles(_) => "tiles",
            GemmVariant::RowLanesFromTexture(TextureOrder::RowMajor) => "lanes_texture",
            GemmVariant::RowLanesFromTexture(TextureOrder::Tiles) => "lanes_tiles",
        }
    }

    /// Its name with the tiles' layout: `tiles/32x32/4x4/f32`, `lanes_tiles`.
    pub fn label(self) -> String {
        match self.tiles() {
            Some(t) => format!("{}/{}", self.name(), t.label()),
            None => self.name().to_string(),
        }
    }

    /// The workgroup tiles' layout (`None` for the row lanes).
    pub fn tiles(self) -> Option<GemmTiles> {
        match self {
            GemmVariant::WorkgroupTiles(t) => Some(t),
            _ => None,
        }
    }

    /// The order of the codes texture this variant reads (`None`: it reads the buffer).
    pub fn texture_order(self) -> Option<TextureOrder> {
        match self {
            GemmVariant::RowLanesFromTexture(order) => Some(order),
            _ => None,
        }
    }

    /// Does this variant read the codes from a texture?
    pub fn reads_texture(self) -> bool {
        self.texture_order().is_some()
    }

    /// Is this one of the CPU-adapter designs?
    pub fn is_lanes(self) -> bool {
        !matches!(self, GemmVariant::WorkgroupTiles(_))
    }
}

/// The workgroup-tiles layout: a workgroup of `(bm / tm) · (bn / tn)` invocations computes
/// `bm` token rows × `bn` matrix rows, each invocation a `tm` × `tn` block held in
/// registers (after ggml-webgpu's register-tiled `mul_mat`); one quant group (64 values)
/// of x and of the dequantized weights is staged in workgroup memory per step, as f16
/// when `f16` (needs `shader-f16`: half the workgroup memory and its traffic; products
/// and sums stay f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmTiles {
    /// Token rows per workgroup.
    pub bm: u32,
    /// Matrix rows per workgroup (for SwiGLU half gate rows, half their up rows).
    pub bn: u32,
    /// Token rows per invocation.
    pub tm: u32,
    /// Matrix rows per invocation (even: SwiGLU pairs its halves).
    pub tn: u32,
    /// The staged tiles in f16.
    pub f16: bool,
}

impl GemmTiles {
    /// 32 × 32 in f32, 4 × 4 per invocation (64 invocations, 16 KiB): any adapter.
    pub const F32: GemmTiles = GemmTiles {
        bm: 32,
        bn: 32,
        tm: 4,
        tn: 4,
        f16: false,
    };
    /// 64 × 64 in f16, 8 × 4 per invocation (128 invocations, 16 KiB): adapters with
    /// `shader-f16`, four times the outputs per staged byte of [`GemmTiles::F32`].
    pub const F16: GemmTiles = GemmTiles {
        bm: 64,
        bn: 64,
        tm: 8,
        tn: 4,
        f16: true,
    };

    /// Invocations per workgroup.
    pub fn invocations(self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// Bytes of workgroup memory: the two staged tiles of 64 values per row.
    pub fn workgroup_bytes(self) -> u32 {
        let elem = if self.f16 { 2 } else { 4 };
        (self.bm + self.bn) * 64 * elem
    }

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

    /// Its part of the pipeline label: `32x32/4x4/f32`.
    pub fn label(self) -> String {
        let ty = if self.f16 { "f16" } else { "f32" };
        format!("{}x{}/{}x{}/{ty}", self.bm, self.bn, self.tm, self.tn)
    }
}

/// Code words of one tile row per 64-value step.
fn words_per_row(format: MatrixFormat) -> u32 {
    match format {
        MatrixFormat::Q4 => 8,
        MatrixFormat::Q8 => 16,
    }
}

enum Kernel {
    Tiles(KernelPipeline, GemmTiles),
    Lanes(LanesGemm),
}

/// A GEMM of fixed N and K (the [`GemvSpec`] of the matching GEMV).
pub struct GemmQ4 {
    kernel: Kernel,
    pub spec: GemvSpec,
}

/// A bound GEMM, ready to encode for any M up to the `max_m` it was bound for.
pub struct GemmDispatch {
    inner: Inner,
    spec: GemvSpec,
}

enum Inner {
    Tiles(Dispatch, GemmTiles),
    Lanes(LanesDispatch),
}

impl GemmQ4 {
    /// The GEMM of `spec` in the profile's variant ([`crate::gpu::DeviceProfile::gemm_for`]).
    pub fn new(ctx: &GpuContext, spec: GemvSpec) -> Result<GemmQ4> {
        let max_uniform = ctx.limits.max_uniform_buffer_binding_size;
        let variant = ctx.profile.gemm_for(spec.k, max_uniform, spec.format);
        Self::with_variant(ctx, variant, spec)
    }

    /// The GEMM of `spec` in `variant` (any variant runs on any adapter).
    pub fn with_variant(ctx: &GpuContext, variant: GemmVariant, spec: GemvSpec) -> Result<GemmQ4> {
        let (n, k) = (spec.n, spec.k);
        if n == 0 || k == 0 || k % 64 != 0 || n > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "GEMM N {n} × K {k}: N must be positive and K a positive multiple of 64"
            )));
        }
        if spec.row0 > 0 {
            return Err(Error::InvalidArgument(format!(
                "GEMM N {n} × K {k}: prefill never computes a part of a split matrix"
            )));
        }
        let constants = spec.constants();
        let kernel = match variant {
            GemmVariant::RowLanesFromTexture(_) if spec.format == MatrixFormat::Q8 => {
                return Err(Error::InvalidArgument(format!(
                    "GEMM N {n} × K {k} of Q8 g32 weights: the workgroup-tiles design runs \
                     them ({} does not)",
                    variant.label()
                )))
            }
            GemmVariant::RowLanesFromTexture(order) => {
                Kernel::Lanes(LanesGemm::new(ctx, spec, &constants, order)?)
            }
            GemmVariant::WorkgroupTiles(tiles) => {
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
                    COMMON_WGSL,
                    weights,
                    WGSL,
                ];
                let label = format!("gemm_{}/tiles/{}", spec.format.name(), tiles.label());
                let kernel = KernelPipeline::new(ctx, &label, &source.concat(), &slots, &constants);
                Kernel::Tiles(kernel, tiles)
            }
        };
        Ok(GemmQ4 { kernel, spec })
    }

    pub fn variant(&self) -> GemmVariant {
        match &self.kernel {
            Kernel::Tiles(_, tiles) => GemmVariant::WorkgroupTiles(*tiles),
            Kernel::Lanes(l) => GemmVariant::RowLanesFromTexture(l.texture),
        }
    }

    /// How the row-lanes kernel loads x (none for the workgroup tiles).
    pub fn x_loads(&self) -> Option<XLoads> {
        match &self.kernel {
            Kernel::Lanes(l) => Some(l.x_loads),
            _ => None,
        }
    }

    /// Token rows a buffer bound as x must hold for `m` rows (the row-lanes variant reads
    /// whole tiles; rows past `m` are read but never affect an output).
    pub fn x_rows(&self, m: usize) -> usize {
        match &self.kernel {
            Kernel::Tiles(..) => m,
            Kernel::Lanes(l) => l.x_rows(m),
        }
    }

    /// Bind `chunk` ([`ChunkUniform`]; its `count` is M), the matrix (`parts · n` rows of
    /// k; the codes as a texture exactly for [`GemmVariant::RowLanesFromTexture`]), `x` ([`GemmQ4::x_rows`]`(max_m)` × k floats; storage buffers of
    /// `GpuContext::storage`, which also allow uniform use), the norm weights (k floats;
    /// exactly when the spec fuses a norm), `bias` (`parts · n` floats, or any small
    /// buffer) and `out` (M × n floats), for up to `max_m` token rows.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        chunk: &wgpu::Buffer,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_m: usize,
    ) -> Result<GemmDispatch> {
        assert_eq!(
            norm_weight.is_some(),
            self.spec.norm_eps.is_some(),
            "gemm_q4: norm weights are bound exactly when the norm is fused"
        );
        let inner = match &self.kernel {
            Kernel::Tiles(kernel, tiles) => {
                let Codes::Buffer(codes) = codes else {
                    panic!("gemm_q4: the workgroup-tiles variant reads codes from storage");
                };
                let grid = tiles_grid(&self.spec, *tiles, max_m)?;
                let norm = norm_weight.unwrap_or(x);
                let buffers = [chunk, codes, qparams, x, norm, bias, out];
                let d = kernel.dispatch(ctx, &buffers, grid[0] * grid[1]);
                Inner::Tiles(d, *tiles)
            }
            Kernel::Lanes(kernel) => {
                let b = Bindings {
                    chunk,
                    codes,
                    qparams,
                    x,
                    norm_weight,
                    bias,
                    out,
                };
                Inner::Lanes(kernel.dispatch(ctx, &b, max_m)?)
            }
        };
        Ok(GemmDispatch {
            inner,
            spec: self.spec,
        })
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

impl GemmDispatch {
    /// Encode the GEMM of `m` token rows (the chunk uniform's count; at most the bound
    /// `max_m`).
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>, m: usize) -> Result<()> {
        match &self.inner {
            Inner::Tiles(d, tiles) => {
                d.encode_grid(pass, tiles_grid(&self.spec, *tiles, m)?);
                Ok(())
            }
            Inner::Lanes(d) => d.encode(pass, m),
        }
    }

    /// Encode for `m` rows in one pass of its own and submit it.
    pub fn run(&self, ctx: &GpuContext, m: usize) -> Result<()> {
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            self.encode(&mut pass, m)?;
        }
        ctx.queue.submit([enc.finish()]);
        Ok(())
    }
}
