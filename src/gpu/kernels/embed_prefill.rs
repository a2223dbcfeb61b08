//! Batched embedding gather for prefill: the chunk's token rows of a Q4 g64 or Q8 g32
//! matrix.

use super::embed_q4::row_reader;
use super::gemm_q4::CHUNK_WGSL;
use super::{Dispatch, KernelPipeline, MatrixFormat, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/embed_prefill.wgsl");

pub struct EmbedPrefill {
    kernel: KernelPipeline,
    /// Row length (the hidden size, a multiple of 64).
    pub k: usize,
}

impl EmbedPrefill {
    /// The gather of rows `k` wide from a table stored in `format`.
    pub fn new(ctx: &GpuContext, k: usize, format: MatrixFormat) -> EmbedPrefill {
        let source = [CHUNK_WGSL, &row_reader(format), WGSL].concat();
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        EmbedPrefill {
            kernel: KernelPipeline::new(
                ctx,
                &format!("embed_prefill_{}", format.name()),
                &source,
                &slots,
                &[("K", k as f64)],
            ),
            k,
        }
    }

    /// Workgroups for `tokens` tokens.
    pub fn workgroups(&self, tokens: usize) -> u32 {
        (tokens * self.k / 4).div_ceil(64) as u32
    }

    /// `tokens`: u32 ids (valid rows, checked by the host); `out`: tokens × k floats.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        chunk: &wgpu::Buffer,
        tokens: &wgpu::Buffer,
        codes: &wgpu::Buffer,
        qparams: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_tokens: usize,
    ) -> Dispatch {
        self.kernel.dispatch(
            ctx,
            &[chunk, tokens, codes, qparams, out],
            self.workgroups(max_tokens),
        )
    }
}
