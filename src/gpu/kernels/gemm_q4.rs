//! Q4 g64 GEMM for batched prefill: `Y[M×N] = X[M×K] · Wᵀ` (+ bias) over the chunk's
//! `M` token rows, with the GEMV's fused RMSNorm prologue and epilogues (store, residual
//! add, gate/up + SwiGLU). Tiled in workgroup memory (shaders/gemm_q4.wgsl); `M` comes
//! from the chunk uniform, so one pipeline and bind group serve every chunk size.

use super::gemv_q4::GemvSpec;
use super::{Dispatch, KernelPipeline, Slot, MAX_GROUPS_PER_DIM};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/gemm_q4.wgsl");
/// The prefill chunk uniform, prepended to the prefill kernels.
pub(crate) const CHUNK_WGSL: &str = include_str!("../../../shaders/chunk.wgsl");

/// Token rows per workgroup tile.
pub const TILE_M: usize = 32;
/// Matrix rows per workgroup tile.
pub const TILE_N: usize = 32;

/// The chunk uniform every prefill kernel reads (`struct Chunk` in shaders/chunk.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ChunkUniform {
    /// Position of the chunk's first token in the sequence.
    pub start: u32,
    /// Tokens in the chunk (the GEMM's M).
    pub count: u32,
    pub pad: [u32; 2],
}

/// A GEMM of fixed N and K (the [`GemvSpec`] of the matching GEMV).
pub struct GemmQ4 {
    kernel: KernelPipeline,
    pub spec: GemvSpec,
}

impl GemmQ4 {
    pub fn new(ctx: &GpuContext, spec: GemvSpec) -> Result<GemmQ4> {
        let (n, k) = (spec.n, spec.k);
        if n == 0 || k == 0 || k % 64 != 0 || n > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "GEMM N {n} × K {k}: N must be positive and K a positive multiple of 64"
            )));
        }
        let constants = [
            ("N", n as f64),
            ("K", k as f64),
            ("EPILOGUE", spec.epilogue.code()),
            ("HAS_BIAS", if spec.bias { 1.0 } else { 0.0 }),
            ("NORM", if spec.norm_eps.is_some() { 1.0 } else { 0.0 }),
            ("EPS", f64::from(spec.norm_eps.unwrap_or(0.0))),
        ];
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let source = [CHUNK_WGSL, WGSL].concat();
        Ok(GemmQ4 {
            kernel: KernelPipeline::new(ctx, "gemm_q4", &source, &slots, &constants),
            spec,
        })
    }

    /// The workgroup grid for `m` token rows: output tiles along x, token tiles along y.
    /// An error when the grid exceeds the per-dimension limit.
    pub fn grid(&self, m: usize) -> Result<[u32; 3]> {
        let outs_per_tile = TILE_N / self.spec.epilogue.parts();
        let x = self.spec.n.div_ceil(outs_per_tile);
        let y = m.div_ceil(TILE_M);
        if x > MAX_GROUPS_PER_DIM as usize || y > MAX_GROUPS_PER_DIM as usize {
            return Err(Error::InvalidArgument(format!(
                "GEMM of {m} × {} needs a {x} × {y} grid, over the per-dimension limit",
                self.spec.n
            )));
        }
        Ok([x as u32, y as u32, 1])
    }

    /// Bind `chunk` ([`ChunkUniform`]; its `count` is M), the matrix (`parts · n` rows of
    /// k), `x` (M × k floats), the norm weights (k floats; exactly when the spec fuses a
    /// norm), `bias` (`parts · n` floats, or any small buffer) and `out` (M × n floats).
    /// The returned dispatch's grid is for `max_m` rows; encode it with
    /// [`Dispatch::encode_grid`] and [`GemmQ4::grid`] for fewer.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        chunk: &wgpu::Buffer,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_weight: Option<&wgpu::Buffer>,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_m: usize,
    ) -> Result<Dispatch> {
        assert_eq!(
            norm_weight.is_some(),
            self.spec.norm_eps.is_some(),
            "gemm_q4: norm weights are bound exactly when the norm is fused"
        );
        let grid = self.grid(max_m)?;
        let norm = norm_weight.unwrap_or(x);
        let mut d = self.kernel.dispatch(
            ctx,
            &[chunk, codes, qparams, x, norm, bias, out],
            grid[0] * grid[1],
        );
        d.grid = grid;
        Ok(d)
    }
}
