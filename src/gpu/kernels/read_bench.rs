//! The read ceiling for benchmarks (shaders/read_bench.wgsl): a vec4 sum of a large buffer,
//! against which the GEMVs' effective bandwidth is stated (the roofline ratio).

use super::{Dispatch, KernelPipeline, Slot};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/read_bench.wgsl");
const WG: u32 = 64;

pub struct ReadBench {
    kernel: KernelPipeline,
    /// f32 values summed (a multiple of 4).
    pub len: usize,
    /// Workgroups; each invocation writes one partial sum.
    pub groups: u32,
}

impl ReadBench {
    /// Sum `len` f32 (a positive multiple of 4) with `groups` workgroups of 64.
    pub fn new(ctx: &GpuContext, len: usize, groups: u32) -> Result<ReadBench> {
        if len == 0 || len % 4 != 0 || len / 4 > u32::MAX as usize || groups == 0 {
            return Err(Error::InvalidArgument(format!(
                "read bench over {len} values with {groups} workgroups: need a positive multiple of 4 and at least one workgroup"
            )));
        }
        let constants = [("N4", (len / 4) as f64), ("WG", f64::from(WG))];
        let slots = [Slot::Read, Slot::ReadWrite];
        Ok(ReadBench {
            kernel: KernelPipeline::new(ctx, "read_bench", WGSL, &slots, &constants),
            len,
            groups,
        })
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
