//! Batched embedding gather for prefill: the chunk's token rows of a Q4 g64 or Q8 g32
//! matrix.

use super::common::wgsl::CHUNK_WGSL;
use super::embed_q4::{row_reader, with_split};
use super::{Binding, Dispatch, KernelPipeline, MatrixFormat, Slot};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/embed_prefill.wgsl");

pub struct EmbedPrefill {
    kernel: KernelPipeline,
    /// Row length (the hidden size, a multiple of 64).
    pub k: usize,
}

impl EmbedPrefill {
    /// The gather of rows `k` wide from a table stored in `format`, bound in one part or
    /// in two whose second starts at row `split` ([`super::embed_q4::split_of`]).
    pub fn new(ctx: &GpuContext, k: usize, format: MatrixFormat, split: Option<usize>) -> Self {
        let source = [CHUNK_WGSL, &row_reader(format), WGSL].concat();
        // chunk, tokens, codes, qparams, out, the second part's codes and qparams.
        let (r, rw) = (Slot::Read, Slot::ReadWrite);
        let slots = [Slot::Uniform, r, r, r, rw, r, r];
        EmbedPrefill {
            kernel: KernelPipeline::new(
                ctx,
                &format!("embed_prefill_{}", format.name()),
                &source,
                &slots,
                &with_split(vec![("K", k as f64)], split),
            ),
            k,
        }
    }

    /// Workgroups for `tokens` tokens.
    pub fn workgroups(&self, tokens: usize) -> u32 {
        (tokens * self.k / 4).div_ceil(64) as u32
    }

    /// `tokens`: u32 ids (valid rows, checked by the host); `table`: its parts
    /// ([`super::embed_q4::table_bindings`]); `out`: tokens × k floats.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        (chunk, tokens): (&wgpu::Buffer, &wgpu::Buffer),
        table: [Binding; 4],
        out: &wgpu::Buffer,
        max_tokens: usize,
    ) -> Dispatch {
        let [codes, qparams, codes_hi, qparams_hi] = table;
        let b = Binding::Buffer;
        let bindings = [
            b(chunk),
            b(tokens),
            codes,
            qparams,
            b(out),
            codes_hi,
            qparams_hi,
        ];
        self.kernel
            .dispatch_bindings(ctx, &bindings, self.workgroups(max_tokens))
    }
}
