//! The tile order of a Q4 matrix's codes texture on CPU adapters, and the kernel that
//! builds it (shaders/soft/q4_tile.wgsl).
//!
//! The CPU-adapter GEMV has each invocation compute several rows (`RowsLayout`), so a
//! row-major texture made every workgroup read ~128 row streams at once, which defeats
//! the CPU's prefetchers: the decode step's texel loads missed the cache and stalled.
//! In tile order (shaders/soft/q4_tile_common.wgsl) a workgroup's codes and qparams are
//! one sequential stream the prefetchers follow, and the qparams leave their per-lane
//! storage loads for the texel path. Other readers (the
//! batched prefill GEMM) find row-major texel i through `code4(i)`.

use crate::error::Result;
use crate::gpu::code_texture::{CodeTexture, WIDTH, WIDTH_SHIFT};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::gemv_q4::{GemvSpec, GemvVariant, RowsLayout};
use crate::gpu::kernels::{Binding, KernelPipeline, Slot};

const COMMON_WGSL: &str = include_str!("../../../../shaders/soft/q4_tile_common.wgsl");
const READ_WGSL: &str = include_str!("../../../../shaders/soft/q4_tile_read.wgsl");
const REPACK_WGSL: &str = include_str!("../../../../shaders/soft/q4_tile.wgsl");

/// Where a matrix's texels sit in tile order: the matrix (`n` output rows of `k`
/// inputs, `parts` matrix rows per output row) and the GEMV layout that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileLayout {
    pub n: usize,
    pub k: usize,
    pub parts: usize,
    pub layout: RowsLayout,
    /// Groups of 64 whose qparams share one texel: 4, 2 or 1, the largest dividing K/64.
    pub qpt: usize,
}

/// What one tile texel holds (the CPU mirror of shaders/soft/q4_tile.wgsl, for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileTexel {
    /// The qparams of groups `first..first + qpt` of matrix row `row`.
    Qparams { row: usize, first: usize },
    /// Code texel `texel` (32 codes) of matrix row `row`.
    Codes { row: usize, texel: usize },
}

impl TileLayout {
    /// The tile order a GEMV of `spec` in `layout` reads.
    pub fn new(spec: &GemvSpec, layout: RowsLayout) -> TileLayout {
        let groups = spec.k / 64;
        let qpt = [4, 2, 1]
            .into_iter()
            .find(|q| groups.is_multiple_of(*q))
            .unwrap_or(1);
        TileLayout {
            n: spec.n,
            k: spec.k,
            parts: spec.epilogue.parts(),
            layout,
            qpt,
        }
    }

    /// The tile order of the tiles GEMV's layout for `spec` (what the model's decode
    /// GEMVs read).
    pub fn for_spec(spec: &GemvSpec) -> TileLayout {
        let layout = RowsLayout::for_variant(GemvVariant::RowsFromTiles, spec.epilogue.parts());
        Self::new(spec, layout)
    }

    /// Matrix rows per block (one workgroup's).
    pub fn slots(&self) -> usize {
        self.layout.rows as usize * self.parts * self.layout.wg as usize
    }

    /// Texels per chunk of `qpt` groups of a block.
    pub fn chunk(&self) -> usize {
        self.slots() * (1 + 2 * self.qpt)
    }

    /// Texels per block.
    pub fn block(&self) -> usize {
        self.k / 64 / self.qpt * self.chunk()
    }

    pub fn blocks(&self) -> usize {
        self.n
            .div_ceil(self.layout.rows as usize * self.layout.wg as usize)
    }

    pub fn texels(&self) -> usize {
        self.blocks() * self.block()
    }

    /// The matrix row at slot position `at` of block `block` (as `tile_row` in WGSL).
    fn row(&self, block: usize, at: usize) -> usize {
        let (wg, rows) = (self.layout.wg as usize, self.layout.rows as usize);
        let (k, lane) = (at / wg, at % wg);
        let o = (block * rows * wg + k / self.parts * wg + lane).min(self.n - 1);
        o + k % self.parts * self.n
    }

    /// What texel `t` holds.
    pub fn texel(&self, t: usize) -> TileTexel {
        let (block, chunk, at) = (
            t / self.block(),
            t % self.block() / self.chunk(),
            t % self.chunk(),
        );
        let slots = self.slots();
        if at < slots {
            return TileTexel::Qparams {
                row: self.row(block, at),
                first: chunk * self.qpt,
            };
        }
        let (j, s) = ((at - slots) / (2 * slots), (at - slots) % (2 * slots));
        TileTexel::Codes {
            row: self.row(block, s / 2),
            texel: 2 * (chunk * self.qpt + j) + s % 2,
        }
    }

    /// The TILE_* constants of the WGSL.
    pub fn constants_wgsl(&self) -> String {
        let c = [
            ("TILE_N", self.n),
            ("TILE_K", self.k),
            ("TILE_PARTS", self.parts),
            ("TILE_ROWS", self.layout.rows as usize),
            ("TILE_WG", self.layout.wg as usize),
            ("TILE_QPT", self.qpt),
            ("TILE_SLOTS", self.slots()),
            ("TILE_CHUNK", self.chunk()),
            ("TILE_BLOCK", self.block()),
            ("TILE_TEXELS", self.texels()),
            ("TILE_WIDTH_MASK", WIDTH as usize - 1),
            ("TILE_WIDTH_SHIFT", WIDTH_SHIFT as usize),
        ];
        c.iter()
            .map(|(name, v)| format!("const {name}: u32 = {v}u;\n"))
            .collect::<String>()
            + COMMON_WGSL
    }

    /// The codes texture binding (`binding`, a read-only storage texture: on lavapipe
    /// its image loads skip the sampled path's per-lane mip-level lookups) read in this
    /// tile order: `tile_texel(i)`, and `code4(i)` for
    /// row-major texel i.
    pub fn read_wgsl(&self, binding: u32) -> String {
        format!(
            "@group(0) @binding({binding}) var codes: texture_storage_2d<rgba32uint, read>;\n{}\
             fn tile_texel(i: u32) -> vec4<u32> {{\n    \
             return textureLoad(codes, vec2<u32>(i & TILE_WIDTH_MASK, i >> TILE_WIDTH_SHIFT));\n}}\n\
             {READ_WGSL}",
            self.constants_wgsl()
        )
    }

    /// Bytes the texture takes (for the memory plan).
    pub fn texture_bytes(&self) -> u64 {
        crate::gpu::code_texture::texture_bytes(16 * self.texels() as u64)
    }
}

/// The repack kernel (shaders/soft/q4_tile.wgsl) of one tile layout: compiled once, run for
/// every matrix of that shape (a model's layers share four).
pub struct TileRepack {
    pub layout: TileLayout,
    kernel: KernelPipeline,
}

impl TileRepack {
    pub fn new(ctx: &GpuContext, layout: TileLayout) -> TileRepack {
        let source = [layout.constants_wgsl().as_str(), REPACK_WGSL].concat();
        let slots = [Slot::Read, Slot::Read, Slot::ReadWrite];
        TileRepack {
            layout,
            kernel: KernelPipeline::new(ctx, "q4_tile", &source, &slots, &[]),
        }
    }

    /// The matrix (`codes` and `qparams` storage buffers) as a texture in this order,
    /// built on the device (submitted here; the queue orders it before later work).
    pub fn build(
        &self,
        ctx: &GpuContext,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
    ) -> Result<CodeTexture> {
        let tile = self.repack(ctx, codes, qparams)?;
        CodeTexture::from_buffer(ctx, &tile, 16 * self.layout.texels() as u64)
    }

    /// The matrix in this order in a storage buffer (`texels()` vec4<u32>; transient,
    /// so not counted in the memory plan), submitted here.
    pub fn repack(
        &self,
        ctx: &GpuContext,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
    ) -> Result<wgpu::Buffer> {
        let texels = self.layout.texels();
        ctx.check_binding("Q4 tile", 16 * texels as u64)?;
        let tile = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("q4 tile"),
            size: 16 * texels as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let b = Binding::Buffer;
        let groups = texels.div_ceil(64) as u32;
        let bindings = [b(codes), b(qparams), b(&tile)];
        crate::gpu::kernels::run(
            ctx,
            &[&self.kernel.dispatch_bindings(ctx, &bindings, groups)],
        );
        Ok(tile)
    }
}
