//! Q4 codes as an `rgba32uint` texture, for the GEMV variant of CPU adapters.
//!
//! On lavapipe (and other CPU-backed adapters) every storage-buffer load is done lane by
//! lane: a scalar load per invocation and component, inserted into the SIMD vector
//! through the stack (a store-forwarding stall each), which caps any storage read far
//! below the machine's memory bandwidth. `textureLoad` goes through the texel-fetch path
//! instead: 16 bytes per invocation per load, several times faster (figures in
//! docs/ARCHITECTURE.md, "Measurements behind the profiles").
//!
//! Layout: a buffer of 16-byte texels read as a linear run, wrapped into rows of [`WIDTH`]
//! texels: texel `i` sits at (`i % WIDTH`, `i / WIDTH`); the copy is made on the device.
//! The model's textures ([`ModelCodeTextures`]) hold each matrix's codes row-major, or
//! its codes and qparams in the decode GEMV's tile order (`soft::q4_tiles`, repacked
//! on the device first), whichever the adapter reads faster ([`TextureOrder`]).

use super::q4_tiles::TileRepack;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, TextureOrder};
use crate::gpu::kernels::common::q4_codes::{Codes, CodesRead};
use crate::gpu::kernels::common::q4_tiles::{
    rows_for, texture_bytes, TileLayout, TEXEL_BYTES, WIDTH,
};
use crate::gpu::kernels::MatrixFormat;
use crate::gpu::weights::{MatrixBuffers, ModelWeights};

/// One matrix's codes as a texture.
pub struct CodeTexture {
    texture: wgpu::Texture,
    pub view: wgpu::TextureView,
}

impl CodeTexture {
    /// A texture holding the `code_bytes` bytes of `codes` (a multiple of 16), copied on
    /// the device (submitted here; the queue orders it before later work).
    pub fn from_buffer(ctx: &GpuContext, codes: &wgpu::Buffer, code_bytes: u64) -> Result<Self> {
        let rows = rows_for(code_bytes);
        let max = u64::from(ctx.limits.max_texture_dimension_2d);
        if code_bytes == 0 || !code_bytes.is_multiple_of(TEXEL_BYTES) || rows > max {
            return Err(Error::ExceedsDeviceLimits {
                what: format!(
                    "Q4 codes texture ({code_bytes} bytes, {rows} rows of {WIDTH} texels)"
                ),
                limit: "max_texture_dimension_2d",
                needed: rows,
                available: max,
            });
        }
        let texture = ctx.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("q4 codes"),
            size: wgpu::Extent3d {
                width: WIDTH,
                height: rows as u32,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Uint,
            // Sampled (texture_2d) or read-only storage (the tile order's reads).
            usage: wgpu::TextureUsages::TEXTURE_BINDING
                | wgpu::TextureUsages::STORAGE_BINDING
                | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        ctx.count(texture_bytes(code_bytes));
        let texels = code_bytes / TEXEL_BYTES;
        let full_rows = texels / u64::from(WIDTH);
        let rest = (texels % u64::from(WIDTH)) as u32;
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        // Whole rows in one copy, the partial last row in another.
        for (first_row, width, height) in [(0, WIDTH, full_rows as u32), (full_rows, rest, 1)] {
            if width == 0 || height == 0 {
                continue;
            }
            let row_bytes = u64::from(WIDTH) * TEXEL_BYTES;
            enc.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer: codes,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: first_row * row_bytes,
                        bytes_per_row: Some(row_bytes as u32),
                        rows_per_image: None,
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture: &texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: first_row as u32,
                        z: 0,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::Extent3d {
                    width,
                    height,
                    depth_or_array_layers: 1,
                },
            );
        }
        ctx.queue.submit([enc.finish()]);
        let view = texture.create_view(&Default::default());
        Ok(CodeTexture { texture, view })
    }

    /// Free the texture now.
    pub fn destroy(&self) {
        self.texture.destroy();
    }
}

/// The codes of every decode GEMV's matrix as textures in the order the adapter's GEMV
/// reads (CPU adapters, [`TextureOrder`]): per layer QKV, attention output, gate/up and
/// down, then the LM head; `None` for Q8 matrices (their GEMV reads the buffer). The
/// storage buffers stay (the embedding lookup reads them).
pub struct ModelCodeTextures {
    pub layers: Vec<[Option<CodeTexture>; 4]>,
    pub head: Option<CodeTexture>,
}

/// How the GEMV reads a matrix of `rows` × `cols` (`parts` matrix rows per output row:
/// 2 for the fused gate/up) held in `order`: the order of its texture in
/// [`ModelCodeTextures`] (other readers of that texture read it so too).
pub(crate) fn read(order: TextureOrder, rows: usize, cols: usize, parts: usize) -> CodesRead {
    let epilogue = if parts == 2 {
        Epilogue::SwiGlu
    } else {
        Epilogue::Store
    };
    CodesRead::new(Some(order), &GemvSpec::new(rows / parts, cols, epilogue))
}

/// The tile repack kernel of `layout` from `kernels`, made and kept there the first time.
fn repack_kernel<'k>(
    kernels: &'k mut Vec<TileRepack>,
    ctx: &GpuContext,
    layout: TileLayout,
) -> &'k TileRepack {
    let i = match kernels.iter().position(|k| k.layout == layout) {
        Some(i) => i,
        None => {
            kernels.push(TileRepack::new(ctx, layout));
            kernels.len() - 1
        }
    };
    &kernels[i]
}

impl ModelCodeTextures {
    pub fn new(
        ctx: &GpuContext,
        w: &ModelWeights,
        order: TextureOrder,
    ) -> Result<ModelCodeTextures> {
        // One tile repack kernel per shape: the layers' four, then the head's.
        let mut kernels: Vec<TileRepack> = Vec::new();
        let mut build = |m: &MatrixBuffers, parts| {
            if m.format == MatrixFormat::Q8 {
                return Ok(None);
            }
            let read = read(order, m.rows, m.cols, parts);
            let repack = match read {
                CodesRead::Tiles(layout) => Some(repack_kernel(&mut kernels, ctx, layout)),
                _ => None,
            };
            let code_bytes = (m.rows * m.cols / 2) as u64;
            let texture = read.build(ctx, (&m.codes, code_bytes), &m.qparams, repack)?;
            Ok::<_, Error>(Some(texture.expect("a texture order builds a texture")))
        };
        let mut layers = Vec::with_capacity(w.layers.len());
        for l in &w.layers {
            layers.push([
                build(&l.qkv, 1)?,
                build(&l.attn_output, 1)?,
                build(&l.gate_up, 2)?,
                build(&l.down, 1)?,
            ]);
        }
        let head = build(w.head(), 1)?;
        Ok(ModelCodeTextures { layers, head })
    }

    /// Bytes the textures of a `cfg` model in `order` take (for the memory plan).
    pub fn bytes(cfg: &ModelConfig, order: TextureOrder) -> u64 {
        let (h, f) = (cfg.hidden_size, cfg.ffn_size);
        let bytes = |rows: usize, cols: usize, parts: usize| {
            read(order, rows, cols, parts).texture_bytes((rows * cols / 2) as u64)
        };
        let layer = bytes(cfg.q_dim() + 2 * cfg.kv_dim(), h, 1)
            + bytes(h, cfg.q_dim(), 1)
            + bytes(2 * f, h, 2)
            + bytes(h, f, 1);
        cfg.n_layers as u64 * layer + bytes(cfg.vocab_size, h, 1)
    }

    pub fn destroy(&self) {
        let layers = self.layers.iter().flatten().flatten();
        layers.chain(&self.head).for_each(CodeTexture::destroy);
    }
}

/// Building the texture a [`CodesRead`] reads (the texture kernels live here, with the
/// CPU adapters' designs).
impl CodesRead {
    /// The texture of a matrix (`codes`, `qparams`: its storage buffers, the codes
    /// `code_bytes` long) read this way, built on the device (`repack`: the tile kernel
    /// of this layout, where one is at hand to reuse). `None` for [`CodesRead::Buffer`].
    pub fn build(
        &self,
        ctx: &GpuContext,
        (codes, code_bytes): (&wgpu::Buffer, u64),
        qparams: &wgpu::Buffer,
        repack: Option<&TileRepack>,
    ) -> Result<Option<CodeTexture>> {
        Ok(Some(match self {
            CodesRead::Buffer => return Ok(None),
            CodesRead::RowMajor => CodeTexture::from_buffer(ctx, codes, code_bytes)?,
            CodesRead::Tiles(t) => {
                let own;
                let repack = match repack {
                    Some(r) => r,
                    None => {
                        own = TileRepack::new(ctx, *t);
                        &own
                    }
                };
                let tile = repack.repack(ctx, codes, qparams)?;
                CodeTexture::from_buffer(ctx, &tile, 16 * repack.layout.texels() as u64)?
            }
        }))
    }
}

/// A matrix's codes as a kernel binds them: the storage buffer, plus its texture copy
/// for the kernels that read one (what tests and benchmarks upload).
pub struct MatrixCodes {
    pub buffer: wgpu::Buffer,
    pub texture: Option<CodeTexture>,
}

impl MatrixCodes {
    /// Upload `codes` (a Q4 tensor's code words; `qparams` its uploaded qparams), with
    /// the texture copy `read` needs.
    pub fn upload(
        ctx: &GpuContext,
        read: CodesRead,
        codes: &[u32],
        qparams: &wgpu::Buffer,
    ) -> Result<MatrixCodes> {
        let buffer = ctx.storage_init("codes", codes)?;
        let code_bytes = 4 * codes.len() as u64;
        let texture = read.build(ctx, (&buffer, code_bytes), qparams, None)?;
        Ok(MatrixCodes { buffer, texture })
    }

    pub fn bind(&self) -> Codes<'_> {
        match &self.texture {
            Some(t) => Codes::Texture(&t.view),
            None => Codes::Buffer(&self.buffer),
        }
    }
}
