//! The read ceilings for benchmarks, against which the GEMVs' effective bandwidth is
//! stated (the roofline ratio): a vec4 sum of a large storage buffer
//! (shaders/read_bench.wgsl), and a sum of a code texture (shaders/read_texture_bench.wgsl;
//! CPU adapters read textures several times faster than storage buffers).

use super::{Binding, Dispatch, KernelPipeline, Slot};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/read_bench.wgsl");
const TEXTURE_WGSL: &str = include_str!("../../../shaders/read_texture_bench.wgsl");
const WG: u32 = 64;

/// How the invocations split the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadLayout {
    /// Invocation i reads vec4s i, i + T, i + 2T, … (T invocations in all).
    Interleaved,
    /// Invocation i reads its own contiguous chunk.
    Chunked,
}

pub struct ReadBench {
    kernel: KernelPipeline,
    /// f32 values summed.
    pub len: usize,
    /// Workgroups; each invocation writes one partial sum.
    pub groups: u32,
    pub layout: ReadLayout,
}

impl ReadBench {
    /// Sum `len` f32 with `groups` workgroups of 64. `len` must be a positive multiple of
    /// 4 (Interleaved) or of 16 · invocations (Chunked: four vec4s per step of each chunk).
    pub fn new(ctx: &GpuContext, len: usize, groups: u32, layout: ReadLayout) -> Result<ReadBench> {
        let step = Self::step(groups, layout);
        if len == 0 || !len.is_multiple_of(step) || len / 4 > u32::MAX as usize || groups == 0 {
            return Err(Error::InvalidArgument(format!(
                "read bench ({layout:?}) over {len} values with {groups} workgroups: need a positive multiple of {step} values and at least one workgroup"
            )));
        }
        let chunked = if layout == ReadLayout::Chunked {
            1.0
        } else {
            0.0
        };
        let constants = [
            ("N4", (len / 4) as f64),
            ("WG", f64::from(WG)),
            ("CHUNKED", chunked),
        ];
        let slots = [Slot::Read, Slot::ReadWrite];
        Ok(ReadBench {
            kernel: KernelPipeline::new(ctx, "read_bench", WGSL, &slots, &constants),
            len,
            groups,
            layout,
        })
    }

    /// What `len` must be a multiple of for `groups` workgroups in `layout`.
    pub fn step(groups: u32, layout: ReadLayout) -> usize {
        match layout {
            ReadLayout::Interleaved => 4,
            ReadLayout::Chunked => 16 * groups as usize * WG as usize,
        }
    }

    /// Partial sums written to `out`: one f32 per invocation.
    pub fn partials(&self) -> usize {
        (self.groups * WG) as usize
    }

    /// `data`: `len` f32; `out`: [`ReadBench::partials`] f32.
    pub fn dispatch(&self, ctx: &GpuContext, data: &wgpu::Buffer, out: &wgpu::Buffer) -> Dispatch {
        self.kernel.dispatch(ctx, &[data, out], self.groups)
    }
}

/// The sum of a code texture (`gpu::code_texture`'s layout), `rows` texture rows per
/// workgroup.
pub struct ReadTextureBench {
    kernel: KernelPipeline,
    pub groups: u32,
}

impl ReadTextureBench {
    /// Sum a texture of `height` rows with `groups` workgroups (`groups` must divide
    /// `height`).
    pub fn new(ctx: &GpuContext, height: u32, groups: u32) -> Result<ReadTextureBench> {
        if groups == 0 || !height.is_multiple_of(groups) {
            return Err(Error::InvalidArgument(format!(
                "texture read bench: {groups} workgroups do not split {height} rows evenly"
            )));
        }
        let constants = [("WG", f64::from(WG)), ("ROWS", f64::from(height / groups))];
        let slots = [Slot::StorageTextureU32, Slot::ReadWrite];
        Ok(ReadTextureBench {
            kernel: KernelPipeline::new(
                ctx,
                "read_texture_bench",
                TEXTURE_WGSL,
                &slots,
                &constants,
            ),
            groups,
        })
    }

    /// What `len` must be a multiple of for `groups` workgroups in `layout`.
    pub fn step(groups: u32, layout: ReadLayout) -> usize {
        match layout {
            ReadLayout::Interleaved => 4,
            ReadLayout::Chunked => 16 * groups as usize * WG as usize,
        }
    }

    /// Partial sums written to `out`: one u32 per invocation.
    pub fn partials(&self) -> usize {
        (self.groups * WG) as usize
    }

    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        data: &wgpu::TextureView,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        let bindings = [Binding::Texture(data), Binding::Buffer(out)];
        self.kernel.dispatch_bindings(ctx, &bindings, self.groups)
    }
}
