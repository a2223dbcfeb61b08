//! Model weights on the GPU, uploaded tensor by tensor from a [`ModelSource`] (one
//! tensor in host memory at a time). Matrices that are used together are stored
//! concatenated by rows so that one GEMV computes them: q|k|v and gate|up.

use super::device::{GpuContext, LimitsNeeded};
use super::kv_cache::KvCache;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::source::ModelSource;
use crate::gpu::kernels::MatrixFormat;
use crate::quant::{Q8Tensor, QMatrix, WeightFormat};
use std::ops::Range;

/// A weight matrix on the GPU in `format` ([`MatrixFormat`]: Q4 g64 codes
/// u32[rows][cols/8] and qparams, or Q8 g32 codes u32[rows][cols/4] and scales, both
/// u32[rows][cols/64] in `qparams`).
#[derive(Clone)]
pub struct MatrixBuffers {
    pub codes: wgpu::Buffer,
    pub qparams: wgpu::Buffer,
    pub rows: usize,
    pub cols: usize,
    pub format: MatrixFormat,
}

/// Rows of each part of a matrix bound in parts are a multiple of this: the parts'
/// offsets then meet any storage offset alignment (256 bytes) and start on a GEMV
/// workgroup's boundary.
pub const PART_ROWS_ALIGN: usize = 4096;

/// One part of a matrix bound in row ranges: its rows and the ranges of its codes and
/// qparams (scales) buffers that hold them.
pub struct MatrixPart<'a> {
    pub rows: Range<usize>,
    pub codes: wgpu::BufferBinding<'a>,
    pub params: wgpu::BufferBinding<'a>,
}

impl MatrixBuffers {
    /// The matrix bound in parts of whole rows, each part's codes within `max_binding`
    /// bytes: one part where the matrix fits (the usual case; a Q8 head of Qwen's
    /// 151,936 × 896 has 136 MB of codes, over WebGPU's default 128 MiB binding).
    pub fn parts(&self, max_binding: u64) -> Result<Vec<MatrixPart<'_>>> {
        let row_bytes = self.format.code_bytes(1, self.cols);
        let param_row_bytes = MatrixFormat::param_bytes(1, self.cols);
        let most = (max_binding / row_bytes) as usize / PART_ROWS_ALIGN * PART_ROWS_ALIGN;
        let per_part = if self.rows as u64 * row_bytes <= max_binding {
            self.rows
        } else if most > 0 {
            most
        } else {
            return Err(Error::ExceedsDeviceLimits {
                what: format!("{} rows of a {}-wide matrix", PART_ROWS_ALIGN, self.cols),
                limit: "max_storage_buffer_binding_size",
                needed: PART_ROWS_ALIGN as u64 * row_bytes,
                available: max_binding,
            });
        };
        let range = |buffer, row_bytes: u64, rows: &Range<usize>| wgpu::BufferBinding {
            buffer,
            offset: rows.start as u64 * row_bytes,
            size: std::num::NonZeroU64::new(rows.len() as u64 * row_bytes),
        };
        Ok((0..self.rows)
            .step_by(per_part)
            .map(|r0| {
                let rows = r0..(r0 + per_part).min(self.rows);
                MatrixPart {
                    codes: range(&self.codes, row_bytes, &rows),
                    params: range(&self.qparams, param_row_bytes, &rows),
                    rows,
                }
            })
            .collect())
    }
}

/// One transformer block's weights.
#[derive(Clone)]
pub struct LayerWeights {
    pub attn_norm: wgpu::Buffer,
    /// q, k and v projections stacked: rows `q_dim + 2·kv_dim`.
    pub qkv: MatrixBuffers,
    /// q, k and v biases stacked (qwen2).
    pub qkv_bias: Option<wgpu::Buffer>,
    /// Per-head RMSNorm weights for q and k (qwen3).
    pub qk_norm: Option<(wgpu::Buffer, wgpu::Buffer)>,
    pub attn_output: MatrixBuffers,
    pub ffn_norm: wgpu::Buffer,
    /// gate then up: rows `2·ffn_size`.
    pub gate_up: MatrixBuffers,
    pub down: MatrixBuffers,
}

impl LayerWeights {
    /// Its matrices in step order: QKV, output, gate/up, down.
    pub fn matrices(&self) -> [&MatrixBuffers; 4] {
        [&self.qkv, &self.attn_output, &self.gate_up, &self.down]
    }
}

#[derive(Clone)]
pub struct ModelWeights {
    pub token_embd: MatrixBuffers,
    pub layers: Vec<LayerWeights>,
    pub output_norm: wgpu::Buffer,
    /// The LM head; `None` when tied to the token embedding.
    pub output: Option<MatrixBuffers>,
}

/// The largest buffer and binding a model of `cfg` with a `context`-position KV cache
/// needs (weights — as Q8 when `q8` may hold any matrix, whose vocabulary table is then
/// bound in parts ([`MatrixBuffers::parts`]) —, KV cache per layer, attention scratch).
pub fn limits_needed(cfg: &ModelConfig, context: usize, q8: bool) -> LimitsNeeded {
    let h = cfg.hidden_size;
    let format = if q8 {
        MatrixFormat::Q8
    } else {
        MatrixFormat::Q4
    };
    let code_bytes = |rows, cols| format.code_bytes(rows, cols);
    let table = code_bytes(cfg.vocab_size, h);
    let bound = [
        code_bytes(cfg.q_dim() + 2 * cfg.kv_dim(), h),
        code_bytes(2 * cfg.ffn_size, h),
        code_bytes(h, cfg.ffn_size),
        code_bytes(h, cfg.q_dim()),
        KvCache::layer_bytes(cfg, context),
        (cfg.n_heads * context * 4) as u64,
        cfg.vocab_size as u64 * 4,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    LimitsNeeded {
        max_buffer: bound.max(table),
        max_storage_binding: if q8 { bound } else { bound.max(table) },
    }
}

/// One GPU buffer of the model (a matrix's pair, or an f32 vector) and the source tensors
/// stacked in it, by rows: `(name, rows)` for matrices `cols` wide, `(name, length)` for
/// vectors. [`layout`] lists them; the disk upload and the browser's streamed upload
/// both follow it.
pub(super) enum Slot {
    Matrix {
        label: String,
        parts: Vec<(String, usize)>,
        cols: usize,
    },
    Vector {
        label: String,
        parts: Vec<(String, usize)>,
    },
}

/// A filled [`Slot`].
pub(super) enum Filled {
    Matrix(MatrixBuffers),
    Vector(wgpu::Buffer),
}

/// Every buffer the forward pass reads, in the order [`assemble`] consumes them.
pub(super) fn layout(cfg: &ModelConfig) -> Vec<Slot> {
    let (h, f, v) = (cfg.hidden_size, cfg.ffn_size, cfg.vocab_size);
    let (qd, kvd, hd) = (cfg.q_dim(), cfg.kv_dim(), cfg.head_dim);
    let q4 = |label: String, parts: Vec<(String, usize)>, cols| Slot::Matrix { label, parts, cols };
    let vector = |label: String, name: String, len| Slot::Vector {
        label,
        parts: vec![(name, len)],
    };
    let mut slots = vec![q4(
        "token_embd".into(),
        vec![("token_embd.weight".into(), v)],
        h,
    )];
    for i in 0..cfg.n_layers {
        let n = |s: &str| format!("blk.{i}.{s}");
        slots.push(vector(n("attn_norm"), n("attn_norm.weight"), h));
        let qkv = vec![
            (n("attn_q.weight"), qd),
            (n("attn_k.weight"), kvd),
            (n("attn_v.weight"), kvd),
        ];
        slots.push(q4(n("qkv"), qkv, h));
        if cfg.qkv_bias {
            slots.push(Slot::Vector {
                label: n("qkv_bias"),
                parts: vec![
                    (n("attn_q.bias"), qd),
                    (n("attn_k.bias"), kvd),
                    (n("attn_v.bias"), kvd),
                ],
            });
        }
        if cfg.qk_norm {
            slots.push(vector(n("q_norm"), n("attn_q_norm.weight"), hd));
            slots.push(vector(n("k_norm"), n("attn_k_norm.weight"), hd));
        }
        slots.push(q4(n("attn_output"), vec![(n("attn_output.weight"), h)], qd));
        slots.push(vector(n("ffn_norm"), n("ffn_norm.weight"), h));
        let gate_up = vec![(n("ffn_gate.weight"), f), (n("ffn_up.weight"), f)];
        slots.push(q4(n("gate_up"), gate_up, h));
        slots.push(q4(n("ffn_down"), vec![(n("ffn_down.weight"), h)], f));
    }
    slots.push(vector("output_norm".into(), "output_norm.weight".into(), h));
    if !cfg.tie_embeddings {
        slots.push(q4("output".into(), vec![("output.weight".into(), v)], h));
    }
    slots
}

/// Whether `src` loaded with `weights` puts any matrix on the GPU as Q8 g32.
pub fn holds_q8(src: &dyn ModelSource, weights: WeightFormat) -> Result<bool> {
    for slot in layout(src.config()) {
        if let Slot::Matrix { parts, .. } = slot {
            for (name, _) in parts {
                if weights.stores_q8(&src.tensor(&name)?.dtype) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// Is the matrix slot of tensors `parts` a vocabulary table (the embedding or the untied
/// head), whose codes may be bound in parts ([`MatrixBuffers::parts`])?
pub(super) fn is_vocab_table(parts: &[(String, usize)]) -> bool {
    matches!(parts, [(name, _)] if name == "token_embd.weight" || name == "output.weight")
}

/// Empty buffers for a matrix slot of `rows` × `cols` in `format`; the codes of a Q8
/// vocabulary table ([`is_vocab_table`]: `table`) may exceed a storage binding.
pub(super) fn alloc_matrix(
    ctx: &GpuContext,
    label: &str,
    (rows, cols): (usize, usize),
    format: MatrixFormat,
    table: bool,
) -> Result<MatrixBuffers> {
    let codes_label = format!("{label}.codes");
    let code_bytes = format.code_bytes(rows, cols);
    let codes = match table && format == MatrixFormat::Q8 {
        true => ctx.storage_in_parts(&codes_label, code_bytes)?,
        false => ctx.storage(&codes_label, code_bytes)?,
    };
    Ok(MatrixBuffers {
        codes,
        qparams: ctx.storage(
            &format!("{label}.qparams"),
            MatrixFormat::param_bytes(rows, cols),
        )?,
        rows,
        cols,
        format,
    })
}

/// The format of a slot stacking tensors of stored types `dtypes` under `weights`: Q8
/// where any of them is held as Q8 ([`WeightFormat::stores_q8`]; the others then join
/// it as Q8, as the CPU backend stacks them), else Q4.
pub(super) fn slot_format<'a>(
    weights: WeightFormat,
    mut dtypes: impl Iterator<Item = &'a str>,
) -> MatrixFormat {
    match dtypes.any(|d| weights.stores_q8(d)) {
        true => MatrixFormat::Q8,
        false => MatrixFormat::Q4,
    }
}

/// Tensor `name` of `src` as one part of a `format` slot: as `weights` holds it, then a
/// Q4 part of a Q8 slot dequantized and requantized to Q8 (as the CPU backend's
/// stacks do, so both backends compute with the same values).
fn read_part(
    src: &mut dyn ModelSource,
    name: &str,
    weights: WeightFormat,
    format: MatrixFormat,
) -> Result<QMatrix> {
    let (m, _) = src.read_matrix(name, weights)?;
    Ok(match (m, format) {
        (QMatrix::Q4(q), MatrixFormat::Q8) => {
            QMatrix::Q8(Q8Tensor::quantize(&q.dequantize(), q.rows, q.cols)?)
        }
        (m, _) => m,
    })
}

/// Upload the row-concatenation of tensors `parts` (name, rows), each `cols` wide, as
/// `weights` holds them ([`slot_format`]).
fn upload_matrix(
    ctx: &GpuContext,
    src: &mut dyn ModelSource,
    weights: WeightFormat,
    label: &str,
    parts: &[(String, usize)],
    cols: usize,
) -> Result<MatrixBuffers> {
    let rows: usize = parts.iter().map(|p| p.1).sum();
    let dtypes = parts
        .iter()
        .map(|(name, _)| Ok(src.tensor(name)?.dtype.clone()))
        .collect::<Result<Vec<_>>>()?;
    let format = slot_format(weights, dtypes.iter().map(String::as_str));
    let out = alloc_matrix(ctx, label, (rows, cols), format, is_vocab_table(parts))?;
    let (mut code_off, mut param_off) = (0u64, 0u64);
    for (name, r) in parts {
        let m = read_part(src, name, weights, format)?;
        if (m.rows(), m.cols()) != (*r, cols) {
            return Err(Error::ShapeMismatch {
                tensor: name.clone(),
                expected: vec![*r, cols],
                found: vec![m.rows(), m.cols()],
            });
        }
        let (codes, params): (&[u8], &[u8]) = match &m {
            QMatrix::Q4(t) => (t.codes_bytes(), t.qparams_bytes()),
            QMatrix::Q8(t) => (
                bytemuck::cast_slice(&t.codes),
                bytemuck::cast_slice(&t.scales),
            ),
        };
        ctx.queue.write_buffer(&out.codes, code_off, codes);
        ctx.queue.write_buffer(&out.qparams, param_off, params);
        code_off += codes.len() as u64;
        param_off += params.len() as u64;
    }
    Ok(out)
}

/// Upload the concatenation of f32 vectors `parts` (name, length).
fn upload_f32(
    ctx: &GpuContext,
    src: &mut dyn ModelSource,
    label: &str,
    parts: &[(String, usize)],
) -> Result<wgpu::Buffer> {
    let total: usize = parts.iter().map(|p| p.1).sum();
    let buf = ctx.storage(label, total as u64 * 4)?;
    let mut off = 0u64;
    for (name, len) in parts {
        let v = src.read_f32(name)?;
        if v.len() != *len {
            return Err(Error::ShapeMismatch {
                tensor: name.clone(),
                expected: vec![*len],
                found: vec![v.len()],
            });
        }
        ctx.queue.write_buffer(&buf, off, bytemuck::cast_slice(&v));
        off += 4 * *len as u64;
    }
    Ok(buf)
}

/// Filled slots, consumed in [`layout`] order.
struct Slots(std::vec::IntoIter<Filled>);

impl Slots {
    fn broken() -> Error {
        Error::Gpu("internal: the weight buffers do not follow the layout".into())
    }

    fn matrix(&mut self) -> Result<MatrixBuffers> {
        match self.0.next() {
            Some(Filled::Matrix(b)) => Ok(b),
            _ => Err(Self::broken()),
        }
    }

    fn vector(&mut self) -> Result<wgpu::Buffer> {
        match self.0.next() {
            Some(Filled::Vector(b)) => Ok(b),
            _ => Err(Self::broken()),
        }
    }
}

/// Build [`ModelWeights`] from filled slots in [`layout`] order.
pub(super) fn assemble(cfg: &ModelConfig, filled: Vec<Filled>) -> Result<ModelWeights> {
    let mut s = Slots(filled.into_iter());
    let token_embd = s.matrix()?;
    let mut layers = Vec::with_capacity(cfg.n_layers);
    for _ in 0..cfg.n_layers {
        let attn_norm = s.vector()?;
        let qkv = s.matrix()?;
        let qkv_bias = match cfg.qkv_bias {
            true => Some(s.vector()?),
            false => None,
        };
        let qk_norm = match cfg.qk_norm {
            true => Some((s.vector()?, s.vector()?)),
            false => None,
        };
        let attn_output = s.matrix()?;
        let ffn_norm = s.vector()?;
        let gate_up = s.matrix()?;
        let down = s.matrix()?;
        layers.push(LayerWeights {
            attn_norm,
            qkv,
            qkv_bias,
            qk_norm,
            attn_output,
            ffn_norm,
            gate_up,
            down,
        });
    }
    let output_norm = s.vector()?;
    let output = match cfg.tie_embeddings {
        true => None,
        false => Some(s.matrix()?),
    };
    if s.0.next().is_some() {
        return Err(Slots::broken());
    }
    Ok(ModelWeights {
        token_embd,
        layers,
        output_norm,
        output,
    })
}

impl ModelWeights {
    /// Upload every tensor of `src` the forward pass uses, each matrix as `weights` holds
    /// it ([`slot_format`]).
    pub fn upload(
        ctx: &GpuContext,
        src: &mut dyn ModelSource,
        weights: WeightFormat,
    ) -> Result<ModelWeights> {
        let cfg = src.config().clone();
        let filled = layout(&cfg)
            .iter()
            .map(|slot| match slot {
                Slot::Matrix { label, parts, cols } => {
                    upload_matrix(ctx, src, weights, label, parts, *cols).map(Filled::Matrix)
                }
                Slot::Vector { label, parts } => {
                    upload_f32(ctx, src, label, parts).map(Filled::Vector)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        assemble(&cfg, filled)
    }

    /// Free every weight buffer now.
    pub fn destroy(&self) {
        let q4 = |m: &MatrixBuffers| {
            m.codes.destroy();
            m.qparams.destroy();
        };
        q4(&self.token_embd);
        for l in &self.layers {
            l.matrices().into_iter().for_each(q4);
            l.attn_norm.destroy();
            l.ffn_norm.destroy();
            l.qkv_bias.iter().for_each(wgpu::Buffer::destroy);
            if let Some((q, k)) = &l.qk_norm {
                q.destroy();
                k.destroy();
            }
        }
        self.output_norm.destroy();
        self.output.iter().for_each(q4);
    }

    /// Every matrix: the token embedding, the layers' in step order, the untied head.
    fn matrices(&self) -> impl Iterator<Item = &MatrixBuffers> {
        let layers = self.layers.iter().flat_map(LayerWeights::matrices);
        [&self.token_embd]
            .into_iter()
            .chain(layers)
            .chain(&self.output)
    }

    /// Whether any matrix is Q8.
    pub fn any_q8(&self) -> bool {
        self.matrices().any(|m| m.format == MatrixFormat::Q8)
    }

    /// The matrices by format: `97 q4` or `61 q4 + 36 q8` (stacks count once).
    pub fn summary(&self) -> String {
        let count = |f| self.matrices().filter(|m| m.format == f).count();
        let parts: Vec<String> = [MatrixFormat::Q4, MatrixFormat::Q8]
            .into_iter()
            .map(|f| (count(f), f))
            .filter(|(n, _)| *n > 0)
            .map(|(n, f)| format!("{n} {}", f.name()))
            .collect();
        parts.join(" + ")
    }

    /// The token embedding bound in parts on `ctx` ([`MatrixBuffers::parts`]).
    pub fn embedding_parts(&self, ctx: &GpuContext) -> Result<Vec<MatrixPart<'_>>> {
        self.token_embd
            .parts(ctx.limits.max_storage_buffer_binding_size)
    }

    /// The LM head: `output.weight`, or the token embedding when tied.
    pub fn head(&self) -> &MatrixBuffers {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}
