//! Where the Q4 kernels (the decode GEMV, the prefill lanes GEMM) read a matrix's codes:
//! its storage buffer, or on CPU adapters its texture copy (`gpu::code_texture`), as a
//! binding and a WGSL accessor `code4(i)` that hide which.

use super::gemv_q4::GemvVariant;
use super::Binding;
use crate::error::Result;
use crate::gpu::code_texture::{CodeTexture, WIDTH, WIDTH_SHIFT};
use crate::gpu::device::GpuContext;

/// Where a dispatch reads the matrix codes: the storage buffer, or its texture copy
/// (for [`GemvVariant::RowsFromTexture`] and the GEMM that reads the same copy).
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

/// A matrix's codes as a GEMV variant binds them: the storage buffer, plus its texture
/// copy for [`GemvVariant::RowsFromTexture`] (what tests and benchmarks upload).
pub struct MatrixCodes {
    pub buffer: wgpu::Buffer,
    pub texture: Option<CodeTexture>,
}

impl MatrixCodes {
    /// Upload `codes` (a Q4 tensor's code words) for `variant`.
    pub fn upload(ctx: &GpuContext, variant: GemvVariant, codes: &[u32]) -> Result<MatrixCodes> {
        let buffer = ctx.storage_init("codes", codes)?;
        let texture = match variant.reads_texture() {
            true => Some(CodeTexture::from_buffer(
                ctx,
                &buffer,
                4 * codes.len() as u64,
            )?),
            false => None,
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

/// The codes binding (`binding`) and its accessor `code4(i)`: vec4 `i` of the codes.
pub(crate) fn codes_decl(texture: bool, binding: u32) -> String {
    if texture {
        format!(
            "@group(0) @binding({binding}) var codes: texture_2d<u32>;\n\
             fn code4(i: u32) -> vec4<u32> {{\n    \
             return textureLoad(codes, vec2<u32>(i & {}u, i >> {WIDTH_SHIFT}u), 0);\n}}\n",
            WIDTH - 1
        )
    } else {
        format!(
            "@group(0) @binding({binding}) var<storage, read> codes: array<vec4<u32>>;\n\
             fn code4(i: u32) -> vec4<u32> {{\n    return codes[i];\n}}\n"
        )
    }
}
