//! The kernel that builds a Q4 matrix's codes texture in tile order on CPU adapters
//! (shaders/soft/q4_tile.wgsl; the order itself, `TileLayout`, is in `common::q4_tiles`;
//! `code_texture` turns the repacked buffer into the texture).
//!
//! The CPU-adapter GEMV has each invocation compute several rows (`RowsLayout`), so a
//! row-major texture made every workgroup read ~128 row streams at once, which defeats
//! the CPU's prefetchers: the decode step's texel loads missed the cache and stalled.
//! In tile order (shaders/common/q4_tile_common.wgsl) a workgroup's codes and qparams are
//! one sequential stream the prefetchers follow, and the qparams leave their per-lane
//! storage loads for the texel path. Other readers (the
//! batched prefill GEMM) find row-major texel i through `code4(i)`.

use crate::error::Result;
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::common::q4_tiles::TileLayout;
use crate::gpu::kernels::{Binding, KernelPipeline, Slot};

const REPACK_WGSL: &str = include_str!("../../../../shaders/soft/q4_tile.wgsl");

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
