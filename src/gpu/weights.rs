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

/// Upload the row-concatenation of Q4 tensors `parts` (name, rows), each `cols` wide.
fn upload_q4(
    ctx: &GpuContext,
    src: &mut dyn ModelSource,
    label: &str,
    parts: &[(String, usize)],
    cols: usize,
) -> Result<Q4Buffers> {
    let rows: usize = parts.iter().map(|p| p.1).sum();
    let codes = ctx.storage(&format!("{label}.codes"), q4_code_bytes(rows, cols))?;
    let qparams = ctx.storage(&format!("{label}.qparams"), rows as u64 * cols as u64 / 16)?;
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
        ctx.queue.write_buffer(&codes, code_off, t.codes_bytes());
        ctx.queue
            .write_buffer(&qparams, param_off, t.qparams_bytes());
        code_off += t.codes_bytes().len() as u64;
        param_off += t.qparams_bytes().len() as u64;
    }
    Ok(Q4Buffers {
        codes,
        qparams,
        rows,
        cols,
    })
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

impl ModelWeights {
    /// Upload every tensor of `src` the forward pass uses.
    pub fn upload(ctx: &GpuContext, src: &mut dyn ModelSource) -> Result<ModelWeights> {
        let cfg = src.config().clone();
        let (h, f, v) = (cfg.hidden_size, cfg.ffn_size, cfg.vocab_size);
        let (qd, kvd, hd) = (cfg.q_dim(), cfg.kv_dim(), cfg.head_dim);
        let one = |name: String, len: usize| vec![(name, len)];
        let token_embd = upload_q4(
            ctx,
            src,
            "token_embd",
            &one("token_embd.weight".into(), v),
            h,
        )?;
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}");
            let qkv_parts = [
                (n("attn_q.weight"), qd),
                (n("attn_k.weight"), kvd),
                (n("attn_v.weight"), kvd),
            ];
            let bias_parts = [
                (n("attn_q.bias"), qd),
                (n("attn_k.bias"), kvd),
                (n("attn_v.bias"), kvd),
            ];
            layers.push(LayerWeights {
                attn_norm: upload_f32(ctx, src, &n("attn_norm"), &one(n("attn_norm.weight"), h))?,
                qkv: upload_q4(ctx, src, &n("qkv"), &qkv_parts, h)?,
                qkv_bias: match cfg.qkv_bias {
                    true => Some(upload_f32(ctx, src, &n("qkv_bias"), &bias_parts)?),
                    false => None,
                },
                qk_norm: match cfg.qk_norm {
                    true => Some((
                        upload_f32(ctx, src, &n("q_norm"), &one(n("attn_q_norm.weight"), hd))?,
                        upload_f32(ctx, src, &n("k_norm"), &one(n("attn_k_norm.weight"), hd))?,
                    )),
                    false => None,
                },
                attn_output: upload_q4(
                    ctx,
                    src,
                    &n("attn_output"),
                    &one(n("attn_output.weight"), h),
                    qd,
                )?,
                ffn_norm: upload_f32(ctx, src, &n("ffn_norm"), &one(n("ffn_norm.weight"), h))?,
                gate_up: upload_q4(
                    ctx,
                    src,
                    &n("gate_up"),
                    &[(n("ffn_gate.weight"), f), (n("ffn_up.weight"), f)],
                    h,
                )?,
                down: upload_q4(ctx, src, &n("ffn_down"), &one(n("ffn_down.weight"), h), f)?,
            });
        }
        let output_norm = upload_f32(
            ctx,
            src,
            "output_norm",
            &one("output_norm.weight".into(), h),
        )?;
        let output = match cfg.tie_embeddings {
            true => None,
            false => Some(upload_q4(
                ctx,
                src,
                "output",
                &one("output.weight".into(), v),
                h,
            )?),
        };
        Ok(ModelWeights {
            token_embd,
            layers,
            output_norm,
            output,
        })
    }

    /// The LM head: `output.weight`, or the token embedding when tied.
    pub fn head(&self) -> &Q4Buffers {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}
