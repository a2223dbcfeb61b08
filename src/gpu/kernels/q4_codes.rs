//! Where the Q4 kernels (the decode GEMV, the prefill lanes GEMM) read a matrix's codes:
//! its storage buffer, or on CPU adapters its texture copy in tile order
//! (`gpu::code_texture`, `q4_tiles`), as a binding and a WGSL accessor `code4(i)` that
//! hide which.

use super::q4_tiles::{TileLayout, TileRead, TileRepack};
use super::Binding;
use crate::error::Result;
use crate::gpu::code_texture::CodeTexture;
use crate::gpu::device::GpuContext;

/// Where a dispatch reads the matrix codes: the storage buffer, or its texture copy
/// (for `GemvVariant::RowsFromTexture` and the GEMM that reads the same copy).
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

/// A matrix's codes as a kernel binds them: the storage buffer, plus its texture copy
/// in `tile` order for the kernels that read one (what tests and benchmarks upload).
pub struct MatrixCodes {
    pub buffer: wgpu::Buffer,
    pub texture: Option<CodeTexture>,
}

impl MatrixCodes {
    /// Upload `codes` (a Q4 tensor's code words; `qparams` its uploaded qparams), with
    /// a texture copy in `tile` order when given.
    pub fn upload(
        ctx: &GpuContext,
        tile: Option<TileLayout>,
        codes: &[u32],
        qparams: &wgpu::Buffer,
    ) -> Result<MatrixCodes> {
        let buffer = ctx.storage_init("codes", codes)?;
        let texture = match tile {
            Some(t) => Some(TileRepack::new(ctx, t).build(ctx, &buffer, qparams)?),
            None => None,
        };
        Ok(MatrixCodes { buffer, texture })
    }

    pub fn bind(&self) -> Codes<'_> {
        match &self.texture {
            Some(t) => Codes::Texture(&t.view),
            None => Codes::Buffer(&self.buffer),
        }
    }
}

/// The codes binding (`binding`) and its accessor `code4(i)`: vec4 `i` of the row-major
/// codes (a texture in `tile` order, bound as its `TileRead` says, when given:
/// `TileLayout::read_wgsl`).
pub(crate) fn codes_decl(tile: Option<(&TileLayout, TileRead)>, binding: u32) -> String {
    if let Some((tile, read)) = tile {
        tile.read_wgsl(binding, read)
    } else {
        format!(
            "@group(0) @binding({binding}) var<storage, read> codes: array<vec4<u32>>;\n\
             fn code4(i: u32) -> vec4<u32> {{\n    return codes[i];\n}}\n"
        )
    }
}
