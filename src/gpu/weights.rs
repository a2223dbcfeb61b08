//! Model weights on the GPU, uploaded tensor by tensor from a [`ModelSource`] (one
//! tensor in host memory at a time). Matrices that are used together are stored
//! concatenated by rows so that one GEMV computes them: q|k|v and gate|up.

use super::device::{GpuContext, LimitsNeeded};
use super::kv_cache::KvCache;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::source::ModelSource;

/// A Q4 g64 matrix on the GPU: codes u32[rows][cols/8], qparams u32[rows][cols/64].
pub struct Q4Buffers {
    pub codes: wgpu::Buffer,
    pub qparams: wgpu::Buffer,
    pub rows: usize,
    pub cols: usize,
}

/// One transformer block's weights.
pub struct LayerWeights {
    pub attn_norm: wgpu::Buffer,
    /// q, k and v projections stacked: rows `q_dim + 2·kv_dim`.
    pub qkv: Q4Buffers,
    /// q, k and v biases stacked (qwen2).
    pub qkv_bias: Option<wgpu::Buffer>,
    /// Per-head RMSNorm weights for q and k (qwen3).
    pub qk_norm: Option<(wgpu::Buffer, wgpu::Buffer)>,
    pub attn_output: Q4Buffers,
    pub ffn_norm: wgpu::Buffer,
    /// gate then up: rows `2·ffn_size`.
    pub gate_up: Q4Buffers,
    pub down: Q4Buffers,
}

pub struct ModelWeights {
    pub token_embd: Q4Buffers,
    pub layers: Vec<LayerWeights>,
    pub output_norm: wgpu::Buffer,
    /// The LM head; `None` when tied to the token embedding.
    pub output: Option<Q4Buffers>,
}

/// Bytes of the codes of a Q4 matrix (its largest part).
fn q4_code_bytes(rows: usize, cols: usize) -> u64 {
    rows as u64 * cols as u64 / 2
}

/// The largest buffer and binding a model of `cfg` with a `context`-position KV cache
/// needs (weights, KV cache per layer, attention scratch).
pub fn limits_needed(cfg: &ModelConfig, context: usize) -> LimitsNeeded {
    let h = cfg.hidden_size;
    let largest = [
        q4_code_bytes(cfg.vocab_size, h),
        q4_code_bytes(cfg.q_dim() + 2 * cfg.kv_dim(), h),
        q4_code_bytes(2 * cfg.ffn_size, h),
        q4_code_bytes(h, cfg.ffn_size),
        q4_code_bytes(h, cfg.q_dim()),
        KvCache::layer_bytes(cfg, context),
        (cfg.n_heads * context * 4) as u64,
        cfg.vocab_size as u64 * 4,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    LimitsNeeded {
        max_buffer: largest,
        max_storage_binding: largest,
    }
}

/// One GPU buffer of the model (a Q4 pair, or an f32 vector) and the source tensors
/// stacked in it, by rows: `(name, rows)` for matrices `cols` wide, `(name, length)` for
/// vectors. [`layout`] lists them; the disk upload and the browser's streamed upload
/// both follow it.
pub(super) enum Slot {
    Q4 {
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
    Q4(Q4Buffers),
    Vector(wgpu::Buffer),
}

/// Every buffer the forward pass reads, in the order [`assemble`] consumes them.
pub(super) fn layout(cfg: &ModelConfig) -> Vec<Slot> {
    let (h, f, v) = (cfg.hidden_size, cfg.ffn_size, cfg.vocab_size);
    let (qd, kvd, hd) = (cfg.q_dim(), cfg.kv_dim(), cfg.head_dim);
    let q4 = |label: String, parts: Vec<(String, usize)>, cols| Slot::Q4 { label, parts, cols };
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

/// Empty buffers for a Q4 slot of `rows` × `cols`.
pub(super) fn alloc_q4(
    ctx: &GpuContext,
    label: &str,
    rows: usize,
    cols: usize,
) -> Result<Q4Buffers> {
    Ok(Q4Buffers {
        codes: ctx.storage(&format!("{label}.codes"), q4_code_bytes(rows, cols))?,
        qparams: ctx.storage(&format!("{label}.qparams"), rows as u64 * cols as u64 / 16)?,
        rows,
        cols,
    })
}

/// Upload the row-concatenation of Q4 tensors `parts` (name, rows), each `cols` wide.
fn upload_q4(
    ctx: &GpuContext,
    src: &mut dyn ModelSource,
    label: &str,
    parts: &[(String, usize)],
    cols: usize,
) -> Result<Q4Buffers> {
    let rows: usize = parts.iter().map(|p| p.1).sum();
    let out = alloc_q4(ctx, label, rows, cols)?;
    let (mut code_off, mut param_off) = (0u64, 0u64);
    for (name, r) in parts {
        let (t, _) = src.read_q4(name)?;
        if (t.rows, t.cols) != (*r, cols) {
            return Err(Error::ShapeMismatch {
                tensor: name.clone(),
                expected: vec![*r, cols],
                found: vec![t.rows, t.cols],
            });
        }
        ctx.queue
            .write_buffer(&out.codes, code_off, t.codes_bytes());
        ctx.queue
            .write_buffer(&out.qparams, param_off, t.qparams_bytes());
        code_off += t.codes_bytes().len() as u64;
        param_off += t.qparams_bytes().len() as u64;
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

    fn q4(&mut self) -> Result<Q4Buffers> {
        match self.0.next() {
            Some(Filled::Q4(b)) => Ok(b),
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
    let token_embd = s.q4()?;
    let mut layers = Vec::with_capacity(cfg.n_layers);
    for _ in 0..cfg.n_layers {
        let attn_norm = s.vector()?;
        let qkv = s.q4()?;
        let qkv_bias = match cfg.qkv_bias {
            true => Some(s.vector()?),
            false => None,
        };
        let qk_norm = match cfg.qk_norm {
            true => Some((s.vector()?, s.vector()?)),
            false => None,
        };
        let attn_output = s.q4()?;
        let ffn_norm = s.vector()?;
        let gate_up = s.q4()?;
        let down = s.q4()?;
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
        false => Some(s.q4()?),
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
    /// Upload every tensor of `src` the forward pass uses.
    pub fn upload(ctx: &GpuContext, src: &mut dyn ModelSource) -> Result<ModelWeights> {
        let cfg = src.config().clone();
        let filled = layout(&cfg)
            .iter()
            .map(|slot| match slot {
                Slot::Q4 { label, parts, cols } => {
                    upload_q4(ctx, src, label, parts, *cols).map(Filled::Q4)
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
        let q4 = |m: &Q4Buffers| {
            m.codes.destroy();
            m.qparams.destroy();
        };
        q4(&self.token_embd);
        for l in &self.layers {
            [&l.qkv, &l.attn_output, &l.gate_up, &l.down]
                .into_iter()
                .for_each(q4);
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

    /// The LM head: `output.weight`, or the token embedding when tied.
    pub fn head(&self) -> &Q4Buffers {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}
