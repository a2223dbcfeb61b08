//! What a decode GEMV computes and in which design, shared by both kernel families and
//! the prefill GEMMs: the spec ([`GemvSpec`], [`Epilogue`]), the designs' names
//! ([`GemvVariant`]) and their layouts ([`GpuRows`] on GPUs; [`RowsLayout`] and
//! [`XLoads`] on CPU adapters).

use crate::gpu::kernels::MatrixFormat;

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
    /// [`crate::gpu::kernels::argmax_partials::ArgmaxPartials`] reduces to the argmax: the LM head's
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
/// x held and dotted in f16 when `f16` (needs shader-f16); x staged once per workgroup in
/// workgroup memory when `x_shared` (where it fits: [`GpuRows::fitted`]).
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
    /// The workgroup loads the input (x, plus the partial vectors) ⊙ norm_w into
    /// workgroup memory once, Σx² summed once, and every slot reads its chunks from there
    /// (shaders/gemv_rows_gpu_shared_x.wgsl), instead of each slot loading (and adding
    /// up, squaring) every chunk again. Only where K floats and the scratch fit
    /// [`GpuRows::WORKGROUP_BYTES`]: elsewhere the GEMV runs without it.
    pub x_shared: bool,
}

/// How a GPU GEMV's row slot sums its lanes' partial sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotReduce {
    /// A tree in workgroup memory (shaders/gemv_q4_rows_gpu_tree.wgsl): any adapter.
    Tree,
    /// `subgroupAdd` (shaders/gemv_q4_rows_gpu_subgroup.wgsl): a slot is exactly one
    /// subgroup (`tpr` = the device's fixed subgroup width).
    Subgroup,
    /// Every lane's partials into workgroup memory, one barrier, then lane 0 of each
    /// slot adds up its slot's (shaders/gemv_q4_rows_gpu_one_barrier.wgsl): any adapter;
    /// one barrier where the tree takes log2(tpr).
    OneBarrier,
}

impl GpuRows {
    pub const MAX_RPS: u32 = 8;

    /// The workgroup memory a design may use: WebGPU's minimum
    /// `maxComputeWorkgroupStorageSize`, which every adapter has.
    pub const WORKGROUP_BYTES: u64 = 16384;

    /// Partial sums per lane: RPS × 2 dot products, then Σx².
    pub fn values(self) -> u32 {
        2 * self.rps + 1
    }

    /// The workgroup memory this layout takes for a GEMV of `k` inputs (with the fused
    /// argmax's slot scratch when `argmax`): the slot reduction's scratch, and with
    /// `x_shared` the staged x and the Σx² partials.
    pub fn workgroup_bytes(self, k: usize, argmax: bool) -> u64 {
        let (nv, wg) = (u64::from(self.values()), u64::from(self.invocations()));
        let reduce = match self.reduce {
            SlotReduce::Tree => nv * wg,
            SlotReduce::Subgroup => 0,
            SlotReduce::OneBarrier => u64::from(self.slots) * (u64::from(self.tpr) * nv + 1),
        };
        let staged = if self.x_shared { k as u64 + wg } else { 0 };
        let argmax = if argmax { 2 * u64::from(self.slots) } else { 0 };
        4 * (reduce + staged + argmax)
    }

    /// This layout for a GEMV of `k` inputs: `x_shared` only where the staged x fits
    /// [`GpuRows::WORKGROUP_BYTES`] (decided here, so the label names what runs).
    pub fn fitted(self, k: usize, argmax: bool) -> GpuRows {
        let fits = self.workgroup_bytes(k, argmax) <= Self::WORKGROUP_BYTES;
        GpuRows {
            x_shared: self.x_shared && fits,
            ..self
        }
    }

    /// Output rows per workgroup.
    pub fn rows(self) -> u32 {
        self.slots * self.rps
    }

    /// Invocations per workgroup.
    pub fn invocations(self) -> u32 {
        self.slots * self.tpr
    }

    /// Its part of the pipeline label: `8x16x2/tree`, `8x16x2/tree/f16`,
    /// `8x16x2/one_barrier/shared_x` (slots × lanes × rows per slot, the reduction, f16 x,
    /// x staged per workgroup).
    pub fn label(self) -> String {
        let reduce = match self.reduce {
            SlotReduce::Tree => "tree",
            SlotReduce::Subgroup => "subgroup",
            SlotReduce::OneBarrier => "one_barrier",
        };
        let ty = if self.f16 { "/f16" } else { "" };
        let shared = if self.x_shared { "/shared_x" } else { "" };
        format!(
            "{}x{}x{}/{reduce}{ty}{shared}",
            self.slots, self.tpr, self.rps
        )
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
    /// at dispatch: [`super::gemv::ResidualParts`]), and the kernel also stores that sum (the next
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
    /// The override values of shaders/common/q4_common.wgsl for this spec (ROW0 only where
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

/// How a CPU adapter's decode matrices sit in their textures: one order per device
/// profile, by measurement (`gpu::profile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextureOrder {
    /// The codes row-major, as in the storage buffer (the qparams stay there), bound as
    /// `texture_2d<u32>`: the `swiftshader` profile's (faster there than tile order).
    RowMajor,
    /// Codes and qparams in the decode GEMV's tile order (`soft::q4_tiles`), bound as a
    /// read-only storage texture: the `lavapipe` profile's.
    Tiles,
}

impl TextureOrder {
    /// Its name in profiles and pipeline labels.
    pub fn name(self) -> &'static str {
        match self {
            TextureOrder::RowMajor => "row_major",
            TextureOrder::Tiles => "tiles",
        }
    }
}

/// How a rows GEMV loads each group's 64 x values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XLoads {
    /// Every invocation loads all 16 vec4s (shaders/soft/gemv_q4_xgroup.wgsl).
    Each,
    /// Each of a subgroup's 8 invocations loads two and broadcasts them
    /// (shaders/soft/gemv_q4_xgroup_lanes.wgsl): the tiles variant, when its 8-invocation
    /// workgroup is one subgroup (the `lavapipe` profile), where every load with a
    /// non-constant index is an 8-lane gather.
    Subgroup,
}

impl XLoads {
    /// The loads `variant` makes in `layout` where the kernels use subgroups of
    /// `subgroup_size` (the profile's).
    pub fn pick(subgroup_size: Option<u32>, variant: GemvVariant, layout: RowsLayout) -> XLoads {
        match variant {
            GemvVariant::RowsFromTiles => Self::for_workgroup(subgroup_size, layout.wg),
            _ => XLoads::Each,
        }
    }

    /// Subgroup loads where a `wg`-invocation workgroup is one subgroup of 8 (the width
    /// the subgroup loaders are written for) where the kernels use subgroups of
    /// `subgroup_size` (the profile's), else each invocation's own.
    pub fn for_workgroup(subgroup_size: Option<u32>, wg: u32) -> XLoads {
        if wg == 8 && subgroup_size == Some(8) {
            XLoads::Subgroup
        } else {
            XLoads::Each
        }
    }

    /// What replaces a shader's `//#subgroup_lane` line (in `main`'s parameters): the
    /// subgroup invocation id `sid` for subgroup loads.
    pub(crate) fn lane_param(self) -> &'static str {
        match self {
            XLoads::Each => "",
            XLoads::Subgroup => ", @builtin(subgroup_invocation_id) sid: u32\n",
        }
    }
}

/// How the rows variant spreads rows: `wg` invocations per workgroup, each computing
/// `rows` output rows strided by `wg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsLayout {
    pub wg: u32,
    pub rows: u32,
}

impl RowsLayout {
    /// The best measured on lavapipe for `parts` matrix rows per output row: 16 matrix
    /// rows per invocation (x loads shared by all of them), 8-wide workgroups (one 256-bit
    /// SIMD batch; small enough that Pocket's 896-row GEMVs span 7 workgroups, so several
    /// threads). The sweep behind it: docs/ARCHITECTURE.md.
    pub fn default_for(parts: usize) -> RowsLayout {
        RowsLayout {
            wg: 8,
            rows: 16 / parts as u32,
        }
    }

    /// The layout `variant` runs in: [`RowsLayout::default_for`], except for the
    /// row-major texture variant (SwiftShader's): 64 matrix rows per invocation in 4-wide
    /// workgroups (one 128-bit SIMD batch), the fastest of the layouts measured in
    /// headless Chromium (docs/ARCHITECTURE.md).
    pub fn for_variant(variant: GemvVariant, parts: usize) -> RowsLayout {
        match variant {
            GemvVariant::RowsFromTexture => RowsLayout {
                wg: 4,
                rows: 64 / parts as u32,
            },
            _ => Self::default_for(parts),
        }
    }
}
