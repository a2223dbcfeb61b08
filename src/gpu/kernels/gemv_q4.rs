//! Q4 g64 GEMV for decode: `y = W·x` (+ bias) with an optional fused RMSNorm prologue
//! (`x` → rmsnorm(x) ⊙ norm weights) and an epilogue (store, residual add, or fused
//! gate/up + SwiGLU). One wrapper over the designs the device profile picks per matrix
//! role: row slots of lanes on GPUs (shaders/gemv_rows_gpu.wgsl), and on CPU adapters
//! several rows per invocation with the codes read from a texture (`soft::gemv_rows`).
//! Q8 g32 matrices (`GemvSpec::format`) run the GPU rows design with the Q8 chunk
//! (shaders/gemv_q8_rows_gpu.wgsl) on every adapter.

pub use super::q4_codes::{Codes, CodesRead, MatrixCodes, TextureOrder};
use super::soft::gemv_rows;
pub use super::soft::gemv_rows::{RowsLayout, XLoads};
use super::{Binding, Dispatch, KernelPipeline, MatrixFormat, Slot};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::weights::MatrixPart;

/// The overrides of [`GemvSpec::constants`] and code unpacking, shared with the GEMM.
pub(crate) const Q4_COMMON_WGSL: &str = concat!(
    include_str!("../../../shaders/q4_common.wgsl"),
    include_str!("../../../shaders/q4_unpack.wgsl")
);
/// Code unpacking alone (`lo4`, `hi4`), for other kernels reading Q4 codes.
pub(crate) const Q4_UNPACK_WGSL: &str = include_str!("../../../shaders/q4_unpack.wgsl");
const COMMON_WGSL: &str = include_str!("../../../shaders/gemv_q4_common.wgsl");
const GPU_ROWS_WGSL: &str = include_str!("../../../shaders/gemv_rows_gpu.wgsl");
const GPU_ROWS_Q4_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu.wgsl");
const GPU_TREE_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_tree.wgsl");
const GPU_SUBGROUP_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_subgroup.wgsl");
const GPU_X_F32_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_f32.wgsl");
const GPU_X_F16_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_f16.wgsl");
const GPU_ARGMAX_WGSL: &str = include_str!("../../../shaders/gemv_q4_rows_gpu_argmax.wgsl");
const PARTS_WGSL: &str = include_str!("../../../shaders/gemv_q4_parts.wgsl");
const GPU_ROWS_Q8_WGSL: &str = include_str!("../../../shaders/gemv_q8_rows_gpu.wgsl");
/// Q8 code unpacking (`i8x4`, `q8_scale`), for every kernel reading Q8 codes.
pub(crate) const Q8_UNPACK_WGSL: &str = include_str!("../../../shaders/q8_unpack.wgsl");

/// What happens to each output row after the dot product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `out[o] = W[o]·x (+ bias)`.
    Store,
    /// `out[o] += W[o]·x (+ bias)`: the residual add, in place.
    AddInto,
    /// `out[o] = silu(W[o]·x) · W[N+o]·x`: W holds the gate rows then the up rows.
    SwiGlu,
    /// [`Epilogue::Store`], and each workgroup's best row (value, index; under the
    /// allowed-token mask only allowed rows) into a partials buffer that
    /// [`super::argmax_partials::ArgmaxPartials`] reduces to the argmax: the LM head's
    /// fused argmax, GPU design only (shaders/gemv_q4_rows_gpu_argmax.wgsl).
    StoreArgmax,
}

impl Epilogue {
    pub(crate) fn code(self) -> f64 {
        match self {
            Epilogue::Store | Epilogue::StoreArgmax => 0.0,
            Epilogue::AddInto => 1.0,
            Epilogue::SwiGlu => 2.0,
        }
    }

    /// Matrix rows per output row.
    pub fn parts(self) -> usize {
        if self == Epilogue::SwiGlu {
            2
        } else {
            1
        }
    }
}

/// Which kernel design computes the GEMV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemvVariant {
    /// Several rows per invocation, no barriers, the codes read from their row-major
    /// texture copy ([`TextureOrder::RowMajor`]): the `swiftshader` profile's.
    RowsFromTexture,
    /// Codes and qparams read from a texture in tile order ([`TextureOrder::Tiles`],
    /// `soft::q4_tiles`): one sequential stream per workgroup, every slot's sums in their
    /// own variables (shaders/soft/gemv_q4_tiled.wgsl): the `lavapipe` profile's.
    RowsFromTiles,
    /// Several rows per workgroup, x reused across them, lanes of a row slot splitting
    /// its chunks (shaders/gemv_rows_gpu.wgsl): the design for real GPUs.
    GpuRows(GpuRows),
}

/// How the GPU design spreads rows: `slots` row slots of `tpr` lanes per workgroup, each
/// slot computing `rps` consecutive output rows, its lanes' sums reduced as `reduce` says;
/// x held and dotted in f16 when `f16` (needs shader-f16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuRows {
    /// Lanes per row slot (a power of two).
    pub tpr: u32,
    pub slots: u32,
    /// Output rows per slot (x reused across them), at most [`GpuRows::MAX_RPS`].
    pub rps: u32,
    pub reduce: SlotReduce,
    /// Each lane's 32 x values scaled by their largest magnitude into f16, the code dot
    /// products in f16 (half the registers for x, f16 arithmetic), sums in f32.
    pub f16: bool,
}

/// How a GPU GEMV's row slot sums its lanes' partial sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotReduce {
    /// A tree in workgroup memory (shaders/gemv_q4_rows_gpu_tree.wgsl): any adapter.
    Tree,
    /// `subgroupAdd` (shaders/gemv_q4_rows_gpu_subgroup.wgsl): a slot is exactly one
    /// subgroup (`tpr` = the device's fixed subgroup width).
    Subgroup,
}

impl GpuRows {
    pub const MAX_RPS: u32 = 8;

    /// Output rows per workgroup.
    pub fn rows(self) -> u32 {
        self.slots * self.rps
    }

    /// Invocations per workgroup.
    pub fn invocations(self) -> u32 {
        self.slots * self.tpr
    }

    fn check(self, ctx: &GpuContext) -> Result<()> {
        if self.f16 && !ctx.adapter.features.shader_f16 {
            return Err(Error::InvalidArgument(format!(
                "GPU GEMV layout {self:?} holds x in f16, and adapter {:?} has no shader-f16",
                ctx.adapter.name
            )));
        }
        let ok = self.tpr.is_power_of_two()
            && self.slots > 0
            && (1..=Self::MAX_RPS).contains(&self.rps)
            && self.invocations() <= 256;
        if ok {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "GPU GEMV layout {self:?}: lanes per slot a power of two, 1..={} rows per slot,              at most 256 invocations",
            Self::MAX_RPS
        )))
    }

    /// The WGSL constants and slot reduction of this layout, with the fused argmax
    /// epilogue when `argmax`, and the body for matrices in `format` (Q8: x in f32).
    fn wgsl(self, argmax: bool, format: MatrixFormat) -> String {
        let (tpr, slots, rps) = (self.tpr, self.slots, self.rps);
        let consts = format!(
            "const TPR: u32 = {tpr}u;\nconst SLOTS: u32 = {slots}u;\nconst RPS: u32 = {rps}u;\n\
             const WG: u32 = {}u;\nconst NV: u32 = {}u;\n",
            self.invocations(),
            2 * rps + 1
        );
        let reduce = match self.reduce {
            SlotReduce::Tree => GPU_TREE_WGSL,
            SlotReduce::Subgroup => GPU_SUBGROUP_WGSL,
        };
        let x = if self.f16 {
            GPU_X_F16_WGSL
        } else {
            GPU_X_F32_WGSL
        };
        let epilogue = if argmax {
            GPU_ARGMAX_WGSL
        } else {
            "fn argmax_epilogue(wg: u32, lid: u32, lane: u32, base: u32) {}\n"
        };
        let chunk = match format {
            MatrixFormat::Q4 => [x, GPU_ROWS_Q4_WGSL].concat(),
            MatrixFormat::Q8 => [Q8_UNPACK_WGSL, GPU_ROWS_Q8_WGSL].concat(),
        };
        [&consts, reduce, epilogue, &chunk, GPU_ROWS_WGSL].concat()
    }

    /// What must open the source (`enable f16;` for the f16 lanes).
    fn enables(self) -> &'static str {
        if self.f16 {
            "enable f16;\n"
        } else {
            ""
        }
    }

    /// Its part of the pipeline label: `8x16x2/tree`, `8x16x2/tree/f16` (slots × lanes ×
    /// rows per slot, the reduction, f16 x).
    pub fn label(self) -> String {
        let reduce = match self.reduce {
            SlotReduce::Tree => "tree",
            SlotReduce::Subgroup => "subgroup",
        };
        let ty = if self.f16 { "/f16" } else { "" };
        format!("{}x{}x{}/{reduce}{ty}", self.slots, self.tpr, self.rps)
    }
}

impl GemvVariant {
    /// Its name in profiles and pipeline labels.
    pub fn name(self) -> &'static str {
        match self {
            GemvVariant::RowsFromTexture => "texture",
            GemvVariant::RowsFromTiles => "tiles",
            GemvVariant::GpuRows(_) => "gpu_rows",
        }
    }

    /// Rows per workgroup of a head GEMV of this variant that fuses the argmax
    /// ([`Epilogue::StoreArgmax`]: the GPU design), `None` where the argmax is a pass of
    /// its own.
    pub fn fused_argmax_rows(self) -> Option<u32> {
        match self {
            GemvVariant::GpuRows(g) => Some(g.rows()),
            _ => None,
        }
    }

    /// The order of the codes texture this variant reads (`None`: it reads the buffer).
    pub fn texture_order(self) -> Option<TextureOrder> {
        match self {
            GemvVariant::RowsFromTexture => Some(TextureOrder::RowMajor),
            GemvVariant::RowsFromTiles => Some(TextureOrder::Tiles),
            _ => None,
        }
    }

    /// Does this variant read the codes from a texture?
    pub fn reads_texture(self) -> bool {
        self.texture_order().is_some()
    }
}

/// What one GEMV computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvSpec {
    /// Output rows (the matrix has `n · epilogue.parts()` rows).
    pub n: usize,
    /// Inputs (a multiple of 64).
    pub k: usize,
    pub epilogue: Epilogue,
    /// Add a bias (`n · parts` floats) before the epilogue.
    pub bias: bool,
    /// Fuse an RMSNorm of x with this epsilon (norm weights bound at dispatch).
    pub norm_eps: Option<f32>,
    /// When positive, the input is x plus this many partial vectors of k floats (bound
    /// at dispatch: [`ResidualParts`]), and the kernel also stores that sum (the next
    /// residual). 0: the input is x.
    pub add_parts: usize,
    /// How the matrix is stored (Q8 g32: the GPU rows design only).
    pub format: MatrixFormat,
    /// The matrix is rows `row0..row0 + n · parts` of a larger one split by rows (bound
    /// part by part: [`crate::gpu::weights::MatrixBuffers::part`]): outputs, and the fused
    /// argmax's indices and partials, start at `row0` (a multiple of the workgroup's
    /// rows; one part only: `Store` and `StoreArgmax` without bias). 0: a whole matrix.
    pub row0: usize,
}

impl GemvSpec {
    /// The override values of shaders/q4_common.wgsl for this spec (ROW0 only where
    /// nonzero: the CPU adapters' designs do not read it).
    pub(crate) fn constants(&self) -> Vec<(&'static str, f64)> {
        let row0 = (self.row0 > 0).then_some(("ROW0", self.row0 as f64));
        let mut c = vec![
            ("N", self.n as f64),
            ("K", self.k as f64),
            ("EPILOGUE", self.epilogue.code()),
            ("HAS_BIAS", if self.bias { 1.0 } else { 0.0 }),
            ("NORM", if self.norm_eps.is_some() { 1.0 } else { 0.0 }),
            ("EPS", f64::from(self.norm_eps.unwrap_or(0.0))),
        ];
        c.extend(row0);
        c
    }

    /// A plain GEMV: no bias, no norm.
    pub fn new(n: usize, k: usize, epilogue: Epilogue) -> GemvSpec {
        GemvSpec {
            n,
            k,
            epilogue,
            bias: false,
            norm_eps: None,
            add_parts: 0,
            format: MatrixFormat::Q4,
            row0: 0,
        }
    }
}

/// The partial vectors a [`GemvSpec::add_parts`] GEMV adds to x (`parts`: add_parts × k
/// floats), and where it stores the sum (`h_out`: k floats, a buffer the dispatch does
/// not otherwise bind).
#[derive(Clone, Copy)]
pub struct ResidualParts<'a> {
    pub parts: &'a wgpu::Buffer,
    pub h_out: &'a wgpu::Buffer,
}

/// The buffers of an [`Epilogue::StoreArgmax`] GEMV's fused argmax: `mask`, the
/// allowed-token mask ([`super::argmax::mask_words`] words), and `partials`,
/// [`GemvQ4::workgroups`] × (index, value bits).
#[derive(Clone, Copy)]
pub struct HeadArgmax<'a> {
    pub mask: &'a wgpu::Buffer,
    pub partials: &'a wgpu::Buffer,
}

/// A GEMV of fixed shape.
pub struct GemvQ4 {
    kernel: KernelPipeline,
    variant: GemvVariant,
    layout: RowsLayout,
    pub spec: GemvSpec,
    /// How it reads the codes.
    codes: CodesRead,
    x_loads: XLoads,
}

/// The per-pipeline WGSL header: the rows variant's constants, the codes binding (read
/// as `codes` says) and the x / norm-weight bindings, as uniform
/// arrays of K/4 vec4 when `uniform_x`, else as storage arrays, and the input accessor `x_in`
/// (shaders/gemv_q4_parts.wgsl when the spec adds partial vectors, their binding uniform
/// when `uniform_parts`).
pub fn gemv_header(
    spec: &GemvSpec,
    layout: RowsLayout,
    (uniform_x, uniform_parts): (bool, bool),
    codes: &CodesRead,
) -> String {
    let uniform_decl = |binding: u32, name: &str, len: usize| {
        format!("@group(0) @binding({binding}) var<uniform> {name}: array<vec4<f32>, {len}>;\n")
    };
    let decl = |binding: u32, name: &str| {
        if uniform_x {
            uniform_decl(binding, name, spec.k / 4)
        } else {
            format!("@group(0) @binding({binding}) var<storage, read> {name}: array<vec4<f32>>;\n")
        }
    };
    let input = if spec.add_parts > 0 {
        let parts = if uniform_parts {
            uniform_decl(6, "add_vecs", spec.add_parts * spec.k / 4)
        } else {
            "@group(0) @binding(6) var<storage, read> add_vecs: array<vec4<f32>>;\n".to_string()
        };
        format!(
            "const ADD_PARTS: u32 = {}u;\n{parts}{PARTS_WGSL}",
            spec.add_parts
        )
    } else {
        "fn x_in(i: u32) -> vec4<f32> {\n    return x[i];\n}\n\
         fn store_residual(first: bool, lid: u32, stride: u32) {}\n"
            .to_string()
    };
    format!(
        "const ROWS: u32 = {}u;\nconst PARTS: u32 = {}u;\n{}{}{}{input}",
        layout.rows,
        spec.epilogue.parts(),
        codes.decl(0),
        decl(2, "x"),
        decl(3, "norm_w")
    )
}

impl GemvQ4 {
    /// The GEMV of `spec` in `variant`, in the variant's rows layout
    /// ([`RowsLayout::for_variant`]).
    pub fn new(ctx: &GpuContext, variant: GemvVariant, spec: GemvSpec) -> Result<GemvQ4> {
        Self::with_layout(
            ctx,
            variant,
            spec,
            RowsLayout::for_variant(variant, spec.epilogue.parts()),
        )
    }

    /// [`GemvQ4::new`] with an explicit rows layout (ignored by the workgroup variant).
    pub fn with_layout(
        ctx: &GpuContext,
        variant: GemvVariant,
        spec: GemvSpec,
        layout: RowsLayout,
    ) -> Result<GemvQ4> {
        let (n, k) = (spec.n, spec.k);
        let argmax = spec.epilogue == Epilogue::StoreArgmax;
        if argmax && (!matches!(variant, GemvVariant::GpuRows(_)) || spec.add_parts > 0) {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k}: the fused argmax needs the GPU rows design ({variant:?}) \
                 and an input without partial vectors"
            )));
        }
        if n == 0 || k == 0 || k % 64 != 0 || n > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k}: rows must be positive and K a positive multiple of 64"
            )));
        }
        let q8 = spec.format == MatrixFormat::Q8;
        if q8 && !matches!(variant, GemvVariant::GpuRows(g) if !g.f16) {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k} of Q8 g32 weights: the GPU rows design with x in f32 runs \
                 them ({variant:?} does not)"
            )));
        }
        if layout.wg == 0 || layout.rows == 0 || layout.wg * layout.rows > 4096 {
            return Err(Error::InvalidArgument(format!(
                "GEMV layout {layout:?}: workgroup and rows must be positive"
            )));
        }
        // x as a uniform array where it fits the uniform binding limit (CPU adapters:
        // their loads from uniforms are broadcast; GPUs read storage through their caches).
        let rows = variant.reads_texture();
        let max_uniform = ctx.limits.max_uniform_buffer_binding_size;
        let uniform_x = rows && 4 * k as u64 <= max_uniform;
        // The partial vectors likewise (Pocket's 14 × 896 floats fit in 64 KiB).
        let uniform_parts = rows && 4 * (spec.add_parts * k) as u64 <= max_uniform;
        let uniform = (uniform_x, uniform_parts);
        let codes = CodesRead::in_layout(variant.texture_order(), &spec, layout);
        let header = gemv_header(&spec, layout, uniform, &codes);
        let x_loads = XLoads::pick(ctx, variant, layout);
        let source = match variant {
            GemvVariant::RowsFromTexture | GemvVariant::RowsFromTiles => {
                let body = gemv_rows::body(codes, layout, spec.epilogue.parts(), x_loads);
                [&header, Q4_COMMON_WGSL, COMMON_WGSL, &body].concat()
            }
            GemvVariant::GpuRows(g) => {
                g.check(ctx)?;
                let body = g.wgsl(argmax, spec.format);
                [g.enables(), &header, Q4_COMMON_WGSL, COMMON_WGSL, &body].concat()
            }
        };
        // The design in the label: `gemv_q4/gpu_rows/8x16x2/tree`, `gemv_q4/tiles/8x16`
        // (+ `/subgroup` for subgroup x loads).
        let label = match variant {
            GemvVariant::GpuRows(g) => {
                let fused = if argmax { "/argmax" } else { "" };
                let kernel = match spec.format {
                    MatrixFormat::Q4 => "gemv_q4",
                    MatrixFormat::Q8 => "gemv_q8",
                };
                format!("{kernel}/{}/{}{fused}", variant.name(), g.label())
            }
            _ => {
                let loads = if x_loads == XLoads::Subgroup {
                    "/subgroup"
                } else {
                    ""
                };
                let (wg, rows) = (layout.wg, layout.rows);
                format!("gemv_q4/{}/{wg}x{rows}{loads}", variant.name())
            }
        };
        let split = spec.row0 > 0;
        let whole_parts = matches!(variant, GemvVariant::GpuRows(g) if spec.row0.is_multiple_of(g.rows() as usize));
        if split
            && (!whole_parts
                || spec.bias
                || !matches!(spec.epilogue, Epilogue::Store | Epilogue::StoreArgmax))
        {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k} from row {}: a part of a split matrix needs the GPU rows \
                 design, a first row on a workgroup's boundary, no bias and a store",
                spec.row0
            )));
        }
        let mut constants = spec.constants();
        if variant == GemvVariant::RowsFromTexture {
            constants.push(("WG", f64::from(layout.wg)));
        }
        let x_slot = if uniform_x { Slot::Uniform } else { Slot::Read };
        let mut slots = vec![
            codes.slot(),
            Slot::Read,
            x_slot,
            x_slot,
            Slot::Read,
            Slot::ReadWrite,
        ];
        if spec.add_parts > 0 {
            let parts_slot = if uniform_parts {
                Slot::Uniform
            } else {
                Slot::Read
            };
            slots.extend([parts_slot, Slot::ReadWrite]);
        }
        if argmax {
            slots.extend([Slot::Read, Slot::ReadWrite]);
        }
        Ok(GemvQ4 {
            kernel: KernelPipeline::new(ctx, &label, &source, &slots, &constants),
            variant,
            layout,
            spec,
            codes,
            x_loads,
        })
    }

    pub fn variant(&self) -> GemvVariant {
        self.variant
    }

    /// How it loads x.
    pub fn x_loads(&self) -> XLoads {
        self.x_loads
    }

    /// How the kernel reads its codes (what [`MatrixCodes::upload`] needs).
    pub fn codes_read(&self) -> CodesRead {
        self.codes
    }

    /// Workgroups for one GEMV.
    pub fn workgroups(&self) -> u32 {
        let n = self.spec.n as u32;
        match self.variant {
            GemvVariant::RowsFromTexture | GemvVariant::RowsFromTiles => {
                n.div_ceil(self.layout.wg * self.layout.rows)
            }
            GemvVariant::GpuRows(g) => n.div_ceil(g.rows()),
        }
    }

    /// Bind `codes`/`qparams` (the matrix, `parts · n` rows; the codes as a texture
    /// exactly for the texture variants, in the order [`GemvQ4::codes_read`] says), `x`
    /// (k floats), the norm weights (k floats; required exactly when the spec fuses a
    /// norm), `bias` (`parts · n` floats, or any small buffer when there is none) and
    /// `out` (n floats). Buffers
    /// bound as x must allow uniform use on CPU adapters (`GpuContext::storage` buffers
    /// do).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        self.dispatch_adding(ctx, codes, qparams, x, norm_weight, bias, out, None)
    }

    /// [`GemvQ4::dispatch`] with the partial vectors added to x (`residual`: required
    /// exactly when the spec's `add_parts` is positive).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_adding(
        &self,
        ctx: &GpuContext,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        residual: Option<ResidualParts>,
    ) -> Dispatch {
        let extra = residual.map(|r| [r.parts, r.h_out]);
        let codes = codes.binding(self.variant.reads_texture(), "gemv_q4");
        let matrix = (codes, Binding::Buffer(qparams));
        self.dispatch_extra(ctx, matrix, x, norm_weight, bias, out, extra)
    }

    /// [`GemvQ4::dispatch`] of one part of a matrix bound in parts (the spec's `row0`
    /// is the part's first row; `out` the whole output), with the fused argmax's buffers
    /// exactly when the spec fuses it.
    pub fn dispatch_part(
        &self,
        ctx: &GpuContext,
        part: &MatrixPart,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        out: &wgpu::Buffer,
        argmax: Option<HeadArgmax>,
    ) -> Dispatch {
        assert_eq!(
            part.rows.start, self.spec.row0,
            "gemv_q4: the part's first row"
        );
        assert_eq!(part.rows.len(), self.spec.n * self.spec.epilogue.parts());
        let matrix = (
            Binding::Range(part.codes.clone()),
            Binding::Range(part.params.clone()),
        );
        let extra = argmax.map(|a| [a.mask, a.partials]);
        self.dispatch_extra(ctx, matrix, x, norm_weight, x, out, extra)
    }

    /// [`GemvQ4::dispatch`] for the [`Epilogue::StoreArgmax`] head, with its argmax's
    /// buffers.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_argmax(
        &self,
        ctx: &GpuContext,
        codes: Codes,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        argmax: HeadArgmax,
    ) -> Dispatch {
        assert_eq!(self.spec.epilogue, Epilogue::StoreArgmax);
        let extra = Some([argmax.mask, argmax.partials]);
        let codes = codes.binding(self.variant.reads_texture(), "gemv_q4");
        let matrix = (codes, Binding::Buffer(qparams));
        self.dispatch_extra(ctx, matrix, x, norm_weight, bias, out, extra)
    }

    /// The dispatch of the matrix's (codes, qparams) bindings, with the bindings past
    /// `out` (6 and 7: the partial vectors and the next residual, or the mask and the
    /// argmax partials), checked against the spec.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_extra(
        &self,
        ctx: &GpuContext,
        (codes, qparams): (Binding, Binding),
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        extra: Option<[&wgpu::Buffer; 2]>,
    ) -> Dispatch {
        let extras = self.spec.add_parts > 0 || self.spec.epilogue == Epilogue::StoreArgmax;
        assert_eq!(
            extra.is_some(),
            extras,
            "gemv_q4: partial vectors (or the argmax's buffers) are bound exactly when the \
             spec adds them (fuses it)"
        );
        assert_eq!(
            norm_weight.is_some(),
            self.spec.norm_eps.is_some(),
            "gemv_q4: norm weights are bound exactly when the norm is fused"
        );
        let norm = norm_weight.unwrap_or(x);
        let b = Binding::Buffer;
        let mut bindings = vec![codes, qparams, b(x), b(norm), b(bias), b(out)];
        if let Some([first, second]) = extra {
            bindings.extend([b(first), b(second)]);
        }
        self.kernel
            .dispatch_bindings(ctx, &bindings, self.workgroups())
    }
}
