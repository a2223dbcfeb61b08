//! Q4 g64 GEMV for decode: `y = W·x` (+ bias) with an epilogue (store, residual add, or
//! fused gate/up + SwiGLU). Two designs behind one wrapper, chosen by adapter class:
//! one invocation per several rows on CPU-backed adapters, one workgroup per row on GPUs.

use super::{Dispatch, KernelPipeline, Slot, REDUCE64_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const COMMON_WGSL: &str = include_str!("../../../shaders/gemv_q4_common.wgsl");
const ROWS_WGSL: &str = include_str!("../../../shaders/gemv_q4.wgsl");
const WORKGROUP_WGSL: &str = include_str!("../../../shaders/gemv_q4_wg.wgsl");

/// Invocations per workgroup and output rows per invocation of the rows variant
/// (`WG` and `ROWS` in gemv_q4.wgsl).
const ROWS_WG: u32 = 64;
const ROWS_PER_INVOCATION: u32 = 4;

/// What happens to each output row after the dot product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `out[o] = W[o]·x (+ bias)`.
    Store,
    /// `out[o] += W[o]·x (+ bias)`: the residual add, in place.
    AddInto,
    /// `out[o] = silu(W[o]·x) · W[N+o]·x`: W holds the gate rows then the up rows.
    SwiGlu,
}

impl Epilogue {
    fn code(self) -> f64 {
        match self {
            Epilogue::Store => 0.0,
            Epilogue::AddInto => 1.0,
            Epilogue::SwiGlu => 2.0,
        }
    }

    /// Matrix rows per output row.
    pub fn parts(self) -> usize {
        if self == Epilogue::SwiGlu {
            2
        } else {
            1
        }
    }
}

/// Which kernel design computes the GEMV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemvVariant {
    /// Several rows per invocation, no barriers: fastest on CPU-backed adapters.
    RowsPerInvocation,
    /// One workgroup per row with a workgroup reduction: the design for real GPUs.
    WorkgroupPerRow,
}

impl GemvVariant {
    /// The variant suited to the context's adapter.
    pub fn for_adapter(ctx: &GpuContext) -> GemvVariant {
        if ctx.adapter.is_cpu {
            GemvVariant::RowsPerInvocation
        } else {
            GemvVariant::WorkgroupPerRow
        }
    }
}

/// A GEMV of fixed shape: `n` output rows from `k` inputs.
pub struct GemvQ4 {
    kernel: KernelPipeline,
    variant: GemvVariant,
    pub n: usize,
    pub k: usize,
    pub epilogue: Epilogue,
    pub has_bias: bool,
}

impl GemvQ4 {
    pub fn new(
        ctx: &GpuContext,
        variant: GemvVariant,
        n: usize,
        k: usize,
        epilogue: Epilogue,
        has_bias: bool,
    ) -> Result<GemvQ4> {
        if n == 0 || k == 0 || k % 64 != 0 || n > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "GEMV {n} × {k}: rows must be positive and K a positive multiple of 64"
            )));
        }
        let source = match variant {
            GemvVariant::RowsPerInvocation => [COMMON_WGSL, ROWS_WGSL].concat(),
            GemvVariant::WorkgroupPerRow => [REDUCE64_WGSL, COMMON_WGSL, WORKGROUP_WGSL].concat(),
        };
        let mut constants = vec![
            ("N", n as f64),
            ("K", k as f64),
            ("EPILOGUE", epilogue.code()),
            ("HAS_BIAS", if has_bias { 1.0 } else { 0.0 }),
        ];
        if variant == GemvVariant::RowsPerInvocation {
            constants.push(("WG", f64::from(ROWS_WG)));
        }
        let slots = [
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        Ok(GemvQ4 {
            kernel: KernelPipeline::new(ctx, "gemv_q4", &source, &slots, &constants),
            variant,
            n,
            k,
            epilogue,
            has_bias,
        })
    }

    /// Workgroups for one GEMV.
    pub fn workgroups(&self) -> u32 {
        let n = self.n as u32;
        match self.variant {
            GemvVariant::RowsPerInvocation => n.div_ceil(ROWS_WG * ROWS_PER_INVOCATION),
            GemvVariant::WorkgroupPerRow => n,
        }
    }

    /// Bind `codes`/`qparams` (the matrix, `parts · n` rows), `x` (k floats), `bias`
    /// (`parts · n` floats, or any small buffer when there is none) and `out` (n floats).
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
        x: &wgpu::Buffer,
        bias: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel
            .dispatch(ctx, &[codes, qparams, x, bias, out], self.workgroups())
    }
}
