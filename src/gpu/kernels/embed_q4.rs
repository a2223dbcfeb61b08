//! Embedding gather: one row (the step's token) of a Q4 g64 or Q8 g32 matrix,
//! dequantized to f32.

use super::gemv_q4::{Q4_UNPACK_WGSL, Q8_UNPACK_WGSL};
use super::{Dispatch, KernelPipeline, MatrixFormat, Slot, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/embed_q4.wgsl");
const Q4_ROW_WGSL: &str = include_str!("../../../shaders/embed_q4_row.wgsl");
const Q8_ROW_WGSL: &str = include_str!("../../../shaders/embed_q8_row.wgsl");

/// `row_vec4(row, i)` for a table in `format` (the gathers' row reader), with its
/// unpacking.
pub(super) fn row_reader(format: MatrixFormat) -> String {
    match format {
        MatrixFormat::Q4 => [Q4_UNPACK_WGSL, Q4_ROW_WGSL].concat(),
        MatrixFormat::Q8 => [Q8_UNPACK_WGSL, Q8_ROW_WGSL].concat(),
    }
}

/// The step token that makes the gather read its token on the GPU (`prev`).
pub const TOKEN_ON_GPU: u32 = u32::MAX;

pub struct EmbedQ4 {
    kernel: KernelPipeline,
    pub k: usize,
}

impl EmbedQ4 {
    /// The gather of a `vocab` × `k` table stored in `format`.
    pub fn new(
        ctx: &GpuContext,
        vocab: usize,
        k: usize,
        format: MatrixFormat,
    ) -> Result<EmbedQ4> {
        if k == 0 || !k.is_multiple_of(64) || vocab == 0 || vocab > u32::MAX as usize - 1 {
            return Err(Error::InvalidArgument(format!(
                "embedding {vocab} × {k}: the width must be a positive multiple of 64, the \
                 vocabulary positive"
            )));
        }
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::Read,
        ];
        Ok(EmbedQ4 {
            kernel: KernelPipeline::new(
                ctx,
                &format!("embed_{}", format.name()),
                &[STEP_WGSL, &row_reader(format), WGSL].concat(),
                &slots,
                &[("K", k as f64), ("VOCAB", vocab as f64)],
            ),
            k,
        })
    }

    /// `step` is the [`crate::gpu::StepUniform`] buffer (its token selects the row; the
    /// caller checks it against the vocabulary), or with [`TOKEN_ON_GPU`] as its token
    /// the first u32 of `prev` does (the previous step's argmax); `out` holds k floats.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        step: &wgpu::Buffer,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
        out: &wgpu::Buffer,
        prev: &wgpu::Buffer,
    ) -> Dispatch {
        self.kernel
            .dispatch(ctx, &[step, codes, qparams, out, prev], 1)
    }
}
