//! The tile order of a Q4 matrix's codes texture on CPU adapters (where a matrix's
//! texels sit, shaders/common/q4_tile_common.wgsl) and how a kernel reads it
//! (shaders/common/q4_tile_read.wgsl): what the codes read (`q4_codes::CodesRead`) of
//! every Q4 kernel names; `soft::q4_tiles` builds the textures. Also the shape every
//! codes texture shares, row-major or in tiles: [`WIDTH`] texels per row.

use super::gemv_spec::{GemvSpec, GemvVariant, RowsLayout};

const COMMON_WGSL: &str = include_str!("../../../../shaders/common/q4_tile_common.wgsl");
const READ_WGSL: &str = include_str!("../../../../shaders/common/q4_tile_read.wgsl");

/// Texels per codes-texture row, in either order (a power of two: the shader splits indices with a mask and a
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
        texture_bytes(16 * self.texels() as u64)
    }
}
