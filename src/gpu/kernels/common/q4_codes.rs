//! Where the Q4 kernels (the decode GEMV, the prefill lanes GEMM) read a matrix's codes:
//! its storage buffer, or on CPU adapters its texture copy (`gpu::code_texture`, which builds it) in one
//! of two orders ([`TextureOrder`]), as a binding and a WGSL accessor `code4(i)` that
//! hide which ([`CodesRead`]).

use super::gemv_spec::{GemvSpec, RowsLayout, TextureOrder};
use super::q4_tiles::{texture_bytes, TileLayout, WIDTH, WIDTH_SHIFT};
use crate::gpu::kernels::{Binding, Slot};

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
