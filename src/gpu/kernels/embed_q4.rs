//! Embedding gather: one row (the step's token) of a Q4 g64 or Q8 g32 matrix,
//! dequantized to f32.

use super::common::wgsl::{Q4_UNPACK_WGSL, Q8_UNPACK_WGSL, STEP_WGSL};
use super::{Binding, Dispatch, KernelPipeline, MatrixFormat, Slot};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::weights::MatrixPart;

const WGSL: &str = include_str!("../../../shaders/embed_q4.wgsl");
const Q4_ROW_WGSL: &str = include_str!("../../../shaders/embed_q4_row.wgsl");
const Q8_ROW_WGSL: &str = include_str!("../../../shaders/embed_q8_row.wgsl");
const PARTS_WGSL: &str = include_str!("../../../shaders/embed_parts.wgsl");

/// `row_vec4(row, i)` for a table in `format` (the gathers' row reader), with its
/// unpacking and the table's access in up to two parts (bindings 5 and 6).
pub(super) fn row_reader(format: MatrixFormat) -> String {
    let row = match format {
        MatrixFormat::Q4 => [Q4_UNPACK_WGSL, Q4_ROW_WGSL].concat(),
        MatrixFormat::Q8 => [Q8_UNPACK_WGSL, Q8_ROW_WGSL].concat(),
    };
    [PARTS_WGSL, &row].concat()
}

/// The first row of a table's second part, for a table bound as `parts` (the gathers
/// take at most two).
pub fn split_of(parts: &[MatrixPart]) -> Result<Option<usize>> {
    match parts {
        [_] => Ok(None),
        [_, hi] => Ok(Some(hi.rows.start)),
        _ => Err(Error::InvalidArgument(format!(
            "an embedding table in {} parts (the gathers take 2: a larger storage binding \
             is needed)",
            parts.len()
        ))),
    }
}

/// A gather's table bindings: (codes, qparams) of the first part, then of the second
/// (the first again for a table in one part).
pub fn table_bindings<'a>(parts: &[MatrixPart<'a>]) -> [Binding<'a>; 4] {
    let hi = parts.last().expect("a table has a part");
    let r = |b: &wgpu::BufferBinding<'a>| Binding::Range(b.clone());
    [
        r(&parts[0].codes),
        r(&parts[0].params),
        r(&hi.codes),
        r(&hi.params),
    ]
}

/// The bindings of a table in one part: its whole codes and qparams buffers.
pub fn whole_table<'a>(codes: &'a wgpu::Buffer, qparams: &'a wgpu::Buffer) -> [Binding<'a>; 4] {
    let b = Binding::Buffer;
    [b(codes), b(qparams), b(codes), b(qparams)]
}

/// The override constants `base` and, for a table in two parts, where the second starts.
pub(super) fn with_split(
    mut base: Vec<(&'static str, f64)>,
    split: Option<usize>,
) -> Vec<(&'static str, f64)> {
    base.extend(split.map(|s| ("SPLIT", s as f64)));
    base
}

/// The step token that makes the gather read its token on the GPU (`prev`).
pub const TOKEN_ON_GPU: u32 = u32::MAX;

pub struct EmbedQ4 {
    kernel: KernelPipeline,
    pub k: usize,
}

impl EmbedQ4 {
    /// The gather of a `vocab` × `k` table stored in `format`, bound in one part or in
    /// two whose second starts at row `split` ([`split_of`]).
    pub fn new(
        ctx: &GpuContext,
        vocab: usize,
        k: usize,
        format: MatrixFormat,
        split: Option<usize>,
    ) -> Result<EmbedQ4> {
        if k == 0 || !k.is_multiple_of(64) || vocab == 0 || vocab > u32::MAX as usize - 1 {
            return Err(Error::InvalidArgument(format!(
                "embedding {vocab} × {k}: the width must be a positive multiple of 64, the \
                 vocabulary positive"
            )));
        }
        // step, codes, qparams, out, prev, the second part's codes and qparams.
        let (r, rw) = (Slot::Read, Slot::ReadWrite);
        let slots = [Slot::Uniform, r, r, rw, r, r, r];
        let constants = with_split(vec![("K", k as f64), ("VOCAB", vocab as f64)], split);
        Ok(EmbedQ4 {
            kernel: KernelPipeline::new(
                ctx,
                &format!("embed_{}", format.name()),
                &[STEP_WGSL, &row_reader(format), WGSL].concat(),
                &slots,
                &constants,
            ),
            k,
        })
    }

    /// `step` is the [`crate::gpu::StepUniform`] buffer (its token selects the row; the
    /// caller checks it against the vocabulary), or with [`TOKEN_ON_GPU`] as its token
    /// the first u32 of `prev` does (the previous step's argmax); `table`: its parts
    /// ([`table_bindings`], [`whole_table`]); `out` holds k floats.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        step: &wgpu::Buffer,
        table: [Binding; 4],
        out: &wgpu::Buffer,
        prev: &wgpu::Buffer,
    ) -> Dispatch {
        let [codes, qparams, codes_hi, qparams_hi] = table;
        let b = Binding::Buffer;
        let bindings = [
            b(step),
            codes,
            qparams,
            b(out),
            b(prev),
            codes_hi,
            qparams_hi,
        ];
        self.kernel.dispatch_bindings(ctx, &bindings, 1)
    }
}
