//! Where the Q4 kernels (the decode GEMV, the prefill lanes GEMM) read a matrix's codes:
//! its storage buffer, or on CPU adapters its texture copy (`gpu::code_texture`, which builds it) in one
//! of two orders ([`TextureOrder`]), as a binding and a WGSL accessor `code4(i)` that
//! hide which ([`CodesRead`]).

use super::gemv_spec::{GemvSpec, RowsLayout};
use super::q4_tiles::TileLayout;
use crate::gpu::kernels::{Binding, Slot};

/// Texels per texture row (a power of two: the shader splits indices with a mask and a
/// shift). 4096 × 16 bytes = 64 KiB per row, a multiple of the 256-byte copy alignment.
pub const WIDTH: u32 = 4096;
/// log2([`WIDTH`]).
pub const WIDTH_SHIFT: u32 = 12;
/// Bytes per texel (`rgba32uint`).
pub(crate) const TEXEL_BYTES: u64 = 16;

/// Texture rows holding `code_bytes` bytes of codes.
pub(crate) fn rows_for(code_bytes: u64) -> u64 {
    (code_bytes / TEXEL_BYTES).div_ceil(u64::from(WIDTH))
}

/// Bytes a texture for `code_bytes` bytes of codes takes (whole rows).
pub fn texture_bytes(code_bytes: u64) -> u64 {
    rows_for(code_bytes) * u64::from(WIDTH) * TEXEL_BYTES
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

/// How one kernel reads one matrix's codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodesRead {
    /// The storage buffer.
    Buffer,
    /// The [`TextureOrder::RowMajor`] texture.
    RowMajor,
    /// The [`TextureOrder::Tiles`] texture, in this layout.
    Tiles(TileLayout),
}

impl CodesRead {
    /// The read of a matrix of `spec`'s shape held in `order` (`None`: no texture), in
    /// the tiles GEMV's layout (the model's textures are built in it).
    pub fn new(order: Option<TextureOrder>, spec: &GemvSpec) -> CodesRead {
        Self::in_layout(order, spec, TileLayout::for_spec(spec).layout)
    }

    /// [`CodesRead::new`] for a GEMV in rows layout `layout` (only tiles depend on it).
    pub fn in_layout(
        order: Option<TextureOrder>,
        spec: &GemvSpec,
        layout: RowsLayout,
    ) -> CodesRead {
        match order {
            None => CodesRead::Buffer,
            Some(TextureOrder::RowMajor) => CodesRead::RowMajor,
            Some(TextureOrder::Tiles) => CodesRead::Tiles(TileLayout::new(spec, layout)),
        }
    }

    /// The kernel slot of the codes.
    pub fn slot(&self) -> Slot {
        match self {
            CodesRead::Buffer => Slot::Read,
            CodesRead::RowMajor => Slot::TextureU32,
            CodesRead::Tiles(_) => Slot::StorageTextureU32,
        }
    }

    /// The codes binding (`binding`) and its accessor `code4(i)`: vec4 `i` of the
    /// row-major codes (and `tile_texel(i)` for tiles: `TileLayout::read_wgsl`).
    pub(crate) fn decl(&self, binding: u32) -> String {
        match self {
            CodesRead::Buffer => format!(
                "@group(0) @binding({binding}) var<storage, read> codes: array<vec4<u32>>;\n\
                 fn code4(i: u32) -> vec4<u32> {{\n    return codes[i];\n}}\n"
            ),
            CodesRead::RowMajor => format!(
                "@group(0) @binding({binding}) var codes: texture_2d<u32>;\n\
                 fn code4(i: u32) -> vec4<u32> {{\n    \
                 return textureLoad(codes, vec2<u32>(i & {}u, i >> {WIDTH_SHIFT}u), 0);\n}}\n",
                WIDTH - 1
            ),
            CodesRead::Tiles(tile) => tile.read_wgsl(binding),
        }
    }

    /// Bytes the texture of a matrix of `code_bytes` bytes of codes read this way takes
    /// (0 for the buffer: counted with the weights).
    pub fn texture_bytes(&self, code_bytes: u64) -> u64 {
        match self {
            CodesRead::Buffer => 0,
            CodesRead::RowMajor => texture_bytes(code_bytes),
            CodesRead::Tiles(tile) => tile.texture_bytes(),
        }
    }
}

/// Where a dispatch reads the matrix codes: the storage buffer, or its texture copy
/// (for the texture GEMV variants and the GEMM that reads the same copy).
#[derive(Clone, Copy)]
pub enum Codes<'a> {
    Buffer(&'a wgpu::Buffer),
    Texture(&'a wgpu::TextureView),
}

impl<'a> Codes<'a> {
    /// The codes as a kernel binding, checked against the kernel's `texture` slot kind.
    pub(crate) fn binding(self, texture: bool, kernel: &str) -> Binding<'a> {
        assert_eq!(
            matches!(self, Codes::Texture(_)),
            texture,
            "{kernel}: codes are bound as a texture exactly when the kernel reads one"
        );
        match self {
            Codes::Buffer(b) => Binding::Buffer(b),
            Codes::Texture(t) => Binding::Texture(t),
        }
    }
}
