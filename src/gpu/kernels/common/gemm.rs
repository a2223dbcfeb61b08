//! What a prefill GEMM computes and in which design, shared by both kernel families: the
//! chunk uniform, the designs' names ([`GemmVariant`]), the workgroup tiles' layout
//! ([`GemmTiles`]) and the buffers a GEMM binds (`GemmBindings`).

use super::gemv_spec::TextureOrder;
use super::q4_codes::Codes;

/// The most token rows per tile of the row-lanes variant: x buffers hold whole tiles,
/// so buffers of a multiple of this many rows suit every GEMM ([`crate::gpu::forward::designs::GemmQ4::x_rows`]).
pub const MAX_LANE_TOKENS: usize = 8;

/// The chunk uniform every prefill kernel reads (`struct Chunk` in shaders/common/chunk.wgsl).
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

    /// Its part of the pipeline label: `32x32/4x4/f32`.
    pub fn label(self) -> String {
        let ty = if self.f16 { "f16" } else { "f32" };
        format!("{}x{}/{}x{}/{ty}", self.bm, self.bn, self.tm, self.tn)
    }
}

/// The buffers one GEMM binds (see `GemmQ4::dispatch`).
pub(crate) struct GemmBindings<'a> {
    pub chunk: &'a wgpu::Buffer,
    pub codes: Codes<'a>,
    pub qparams: &'a wgpu::Buffer,
    pub x: &'a wgpu::Buffer,
    pub norm_weight: Option<&'a wgpu::Buffer>,
    pub bias: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
}
