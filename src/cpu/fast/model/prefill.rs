//! Batched prefill: a prompt in chunks of up to `prefill_chunk` tokens, each chunk through
//! the layers together. Every matrix input is prepared ([`Acts`]) once per token per
//! chunk, and each matrix is read once per chunk, its groups multiplied with a tile of
//! tokens at a time ([`gemm`]); the per-token steps (bias, q/k norm, RoPE, the cache
//! write) are decode's own. Attention is causal within the chunk: the chunk's keys and
//! values are written first, then token `t` attends to positions `0..=pos + t`, the tokens
//! split across threads.
//!
//! A token's numbers are those of decoding it alone (the same prepared inputs and integer
//! sums), up to the order of the f32 additions.

use super::FastModel;
use crate::cpu::fast::acts::Acts;
use crate::cpu::fast::gemm::{gemm, gemm_swiglu};
use crate::cpu::fast::gemv::{for_row_chunks, on_pool};
use crate::cpu::ops::{add_in_place, rmsnorm, rmsnorm_into, Rope};
use crate::cpu::KvCache;
use crate::error::Result;

/// Prompt tokens per chunk by default: enough that each weight group is reused across
/// many tokens, few enough that a chunk's activations (64 × 2,560 bytes for the widest
/// Pocket matrix input) stay in the L2 cache.
pub const PREFILL_CHUNK: usize = 64;

/// Which positions of a prefill get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// None: prompt tokens whose successors are not needed.
    None,
    /// The last position's.
    Last,
    /// Every position's (tests).
    All,
    /// No logits: every position's final hidden state after the output norm (`hidden`
    /// values per position; an embedding's rows, `crate::embed`).
    Hidden,
}

/// Per-chunk buffers, `[token][values]`.
struct Scratch {
    acts: Vec<Acts>,
    qkv: Vec<f32>,
    attn: Vec<f32>,
    ffn: Vec<f32>,
    h: Vec<f32>,
}

/// `acts[t] ← x_t` for each `width`-value row `x_t` of `x`.
fn set_acts(acts: &mut [Acts], x: &[f32], width: usize) {
    for (a, x) in acts.iter_mut().zip(x.chunks_exact(width)) {
        a.set(x);
    }
}

/// `acts[t] ← rmsnorm(x_t) · weight` for each row `x_t` of `x`.
fn norm_acts(acts: &mut [Acts], x: &[f32], weight: &[f32], eps: f32) {
    let mut h = vec![0.0f32; weight.len()];
    for (a, x) in acts.iter_mut().zip(x.chunks_exact(weight.len())) {
        rmsnorm_into(x, weight, eps, &mut h);
        a.set(&h);
    }
}

impl FastModel {
    /// Run `tokens` at positions `cache.len()..`, appending their keys and values to the
    /// cache, in chunks of `prefill_chunk` tokens; returns the logits asked for, one
    /// vocabulary-long row per position (none, the last position's, or every position's),
    /// or ([`Logits::Hidden`]) every position's normed hidden state.
    /// Nothing runs when a token is outside the vocabulary or they do not all fit.
    pub fn prefill(&self, tokens: &[u32], cache: &mut KvCache, logits: Logits) -> Result<Vec<f32>> {
        cache.check_tokens(&self.config, tokens)?;
        let chunks = tokens.len().div_ceil(self.prefill_chunk);
        let mut out = vec![];
        for (i, chunk) in tokens.chunks(self.prefill_chunk).enumerate() {
            let wanted = match logits {
                Logits::Last if i + 1 < chunks => Logits::None,
                l => l,
            };
            out.extend(on_pool(|| self.chunk(chunk, cache, wanted)));
        }
        Ok(out)
    }

    /// `tokens` as a sequence of their own from position 0, in a cache of their own
    /// (any other cache untouched): every position's final hidden state after the output
    /// norm, `[token][hidden]` (an embedding's rows, `crate::embed`).
    pub fn hidden_states(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        let mut cache = self.new_cache(tokens.len())?;
        self.prefill(tokens, &mut cache, Logits::Hidden)
    }

    /// One chunk (checked by `prefill`).
    fn chunk(&self, tokens: &[u32], cache: &mut KvCache, logits: Logits) -> Vec<f32> {
        let cfg = &self.config;
        let (n, hidden, pos) = (tokens.len(), cfg.hidden_size, cache.len);
        let mut x = vec![0.0f32; n * hidden];
        for (&t, row) in tokens.iter().zip(x.chunks_exact_mut(hidden)) {
            self.weights
                .dequantize_row(&self.token_embd, t as usize, row);
        }
        let acts = Acts {
            precision: self.precision,
            ..Acts::default()
        };
        let mut s = Scratch {
            acts: vec![acts; n],
            qkv: vec![0.0; n * (cfg.q_dim() + 2 * cfg.kv_dim())],
            attn: vec![0.0; n * cfg.q_dim()],
            ffn: vec![0.0; n * cfg.ffn_size],
            h: vec![0.0; n * hidden],
        };
        let ropes: Vec<Rope> = (pos..pos + n)
            .map(|p| Rope::new(cfg.head_dim, cfg.rope_theta, p))
            .collect();
        for (li, layer) in self.layers.iter().enumerate() {
            self.attention_chunk(li, &ropes, &mut x, &mut s, cache, pos);
            norm_acts(&mut s.acts, &x, &layer.ffn_norm, cfg.rms_eps);
            let (gate, up) = (self.rows(&layer.gate), self.rows(&layer.up));
            gemm_swiglu(self.kernel, gate, up, &s.acts, &mut s.ffn);
            set_acts(&mut s.acts, &s.ffn, cfg.ffn_size);
            gemm(self.kernel, self.rows(&layer.down), &s.acts, &mut s.h);
            add_in_place(&mut x, &s.h);
        }
        cache.len = pos + n;
        let rows = match logits {
            Logits::None => return vec![],
            Logits::Last => &mut x[(n - 1) * hidden..],
            Logits::All | Logits::Hidden => &mut x[..],
        };
        for row in rows.chunks_exact_mut(hidden) {
            rmsnorm(row, &self.output_norm, cfg.rms_eps);
        }
        if logits == Logits::Hidden {
            return x;
        }
        let m = rows.len() / hidden;
        set_acts(&mut s.acts[..m], rows, hidden);
        let mut out = vec![0.0f32; m * cfg.vocab_size];
        gemm(self.kernel, self.head(), &s.acts[..m], &mut out);
        out
    }

    /// `x_t += Wo · attention(...)` of layer `li` for the chunk's tokens at positions
    /// `pos..`, writing their keys and values into the cache first.
    fn attention_chunk(
        &self,
        li: usize,
        ropes: &[Rope],
        x: &mut [f32],
        s: &mut Scratch,
        cache: &mut KvCache,
        pos: usize,
    ) {
        let (cfg, layer) = (&self.config, &self.layers[li]);
        let (q_dim, qkv_dim) = (cfg.q_dim(), cfg.q_dim() + 2 * cfg.kv_dim());
        norm_acts(&mut s.acts, x, &layer.attn_norm, cfg.rms_eps);
        gemm(self.kernel, self.rows(&layer.qkv), &s.acts, &mut s.qkv);
        for (t, (qkv, rope)) in s.qkv.chunks_exact_mut(qkv_dim).zip(ropes).enumerate() {
            self.qkv_to_cache(li, rope, qkv, cache, pos + t);
        }
        let kv = (&cache.keys[li][..], &cache.values[li][..]);
        let qkv = &s.qkv;
        for_row_chunks(&mut s.attn, q_dim, |first, out| {
            let t = first / q_dim;
            self.attend(&qkv[t * qkv_dim..][..q_dim], 0, kv, pos + t + 1, out);
        });
        set_acts(&mut s.acts, &s.attn, q_dim);
        gemm(self.kernel, self.rows(&layer.wo), &s.acts, &mut s.h);
        add_in_place(x, &s.h);
    }
}
