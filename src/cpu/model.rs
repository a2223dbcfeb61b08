//! The decoder forward pass, one token at a time with a KV cache:
//!
//! ```text
//! x = embed(token)
//! per layer:  h = rmsnorm(x)
//!             q, k, v = Wq·h (+bq), Wk·h (+bk), Wv·h (+bv)
//!             q, k = per-head rmsnorm (qwen3); RoPE(q, k, pos)
//!             x += Wo · attention(q, K[0..=pos], V[0..=pos])      (GQA)
//!             h = rmsnorm(x)
//!             x += Wdown · (silu(Wgate·h) ⊙ Wup·h)
//! logits = head · rmsnorm(x)          (Model::hidden: rmsnorm(x), an embedding's row)
//! ```

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::ModelSource;

use super::ops::{add_in_place, attend_head, rmsnorm, rmsnorm_into, swiglu, KvHead, Rope};
use super::weights::{LayerWeights, ModelWeights, WeightMode};

/// A model ready to run on the CPU.
#[derive(Clone, Debug)]
pub struct Model {
    pub config: ModelConfig,
    pub weights: ModelWeights,
}

/// Keys and values of the tokens seen so far, per layer: `[position][kv_dim]`, f32.
/// Shared by the oracle and the fast CPU backend (`cpu::fast`).
#[derive(Clone, Debug)]
pub struct KvCache {
    pub(super) keys: Vec<Vec<f32>>,
    pub(super) values: Vec<Vec<f32>>,
    pub(super) kv_dim: usize,
    capacity: usize,
    pub(super) len: usize,
}

impl KvCache {
    /// An empty cache for up to `max_len` tokens of `cfg` (allocated up front:
    /// `2 · layers · max_len · kv_dim` f32).
    pub(super) fn new(cfg: &ModelConfig, max_len: usize) -> Result<KvCache> {
        let kv_dim = cfg.kv_dim();
        let per_layer = max_len.checked_mul(kv_dim).ok_or_else(|| {
            Error::InvalidArgument(format!("KV cache of {max_len} tokens is too large"))
        })?;
        let layers = cfg.n_layers;
        Ok(KvCache {
            keys: vec![vec![0.0; per_layer]; layers],
            values: vec![vec![0.0; per_layer]; layers],
            kv_dim,
            capacity: max_len,
            len: 0,
        })
    }

    /// Check that `token` can run next with this cache on a model of `cfg`; returns its
    /// position.
    pub(super) fn check_step(&self, cfg: &ModelConfig, token: u32) -> Result<usize> {
        self.check_tokens(cfg, &[token])
    }

    /// Check that `tokens` can run next, in order, with this cache on a model of `cfg`;
    /// returns the first one's position.
    pub(super) fn check_tokens(&self, cfg: &ModelConfig, tokens: &[u32]) -> Result<usize> {
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= cfg.vocab_size) {
            return Err(Error::InvalidArgument(format!(
                "token id {token} is outside the vocabulary of {}",
                cfg.vocab_size
            )));
        }
        if self.keys.len() != cfg.n_layers || self.kv_dim != cfg.kv_dim() {
            return Err(Error::InvalidArgument(
                "KV cache was made for a different model".into(),
            ));
        }
        if self.len + tokens.len() > self.capacity {
            return Err(Error::InvalidArgument(format!(
                "KV cache is full ({} tokens)",
                self.capacity
            )));
        }
        Ok(self.len)
    }

    /// Tokens held (the position the next token gets).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most tokens it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keep only the first `len` tokens (no-op when it holds fewer).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Forget every token (keeps the memory).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The K and V rows of positions `start..start + count` (held ones), per layer K then
    /// V, each `[position][kv_dim]` little-endian f32: a session snapshot's rows.
    pub fn rows(&self, start: usize, count: usize) -> Vec<u8> {
        let end = (start + count).min(self.len);
        let (a, b) = (start.min(end) * self.kv_dim, end * self.kv_dim);
        let planes = self.keys.iter().zip(&self.values);
        let planes = planes.flat_map(|(k, v)| [&k[a..b], &v[a..b]]);
        planes
            .flat_map(bytemuck::cast_slice::<f32, u8>)
            .copied()
            .collect()
    }

    /// Write `count` positions of rows laid out as [`KvCache::rows`] at `start` (at most
    /// the positions held); the cache then holds `start + count`.
    pub fn write_rows(&mut self, start: usize, count: usize, rows: &[u8]) -> Result<()> {
        let plane = count * self.kv_dim * 4;
        if start > self.len
            || start + count > self.capacity
            || rows.len() != plane * 2 * self.keys.len()
        {
            return Err(Error::InvalidArgument(format!(
                "{} bytes of KV rows for {count} positions at {start} do not fit a cache of \
                 {} positions holding {}",
                rows.len(),
                self.capacity,
                self.len
            )));
        }
        let (a, b) = (start * self.kv_dim, (start + count) * self.kv_dim);
        let planes = self.keys.iter_mut().zip(self.values.iter_mut());
        let planes = planes.flat_map(|(k, v)| [&mut k[a..b], &mut v[a..b]]);
        for (dst, src) in planes.zip(rows.chunks_exact(plane)) {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = f32::from_le_bytes(s.try_into().unwrap());
            }
        }
        self.len = start + count;
        Ok(())
    }
}

impl Model {
    /// Load from any source, every tensor checked against the config's shapes.
    pub fn load(src: &mut dyn ModelSource, mode: WeightMode) -> Result<Model> {
        let config = src.config().clone();
        config.validate("model config")?;
        let weights = ModelWeights::load(src, mode)?;
        Ok(Model { config, weights })
    }

    /// An empty cache for up to `max_len` tokens (allocated up front:
    /// `2 · layers · max_len · kv_dim` f32).
    pub fn new_cache(&self, max_len: usize) -> Result<KvCache> {
        KvCache::new(&self.config, max_len)
    }

    /// Run `token` at position `cache.len()`, append its keys and values to the cache,
    /// and return the logits over the vocabulary.
    pub fn forward(&self, token: u32, cache: &mut KvCache) -> Result<Vec<f32>> {
        let x = self.hidden(token, cache)?;
        let mut logits = vec![0.0f32; self.config.vocab_size];
        self.weights.lm_head().matvec(&x, &mut logits);
        Ok(logits)
    }

    /// [`Model::forward`] without the head: the final hidden state after the output norm
    /// (what the head reads; an embedding's row, `crate::embed`).
    pub fn hidden(&self, token: u32, cache: &mut KvCache) -> Result<Vec<f32>> {
        let cfg = &self.config;
        let pos = cache.check_step(cfg, token)?;

        let mut x = vec![0.0f32; cfg.hidden_size];
        self.weights.token_embd.row(token as usize, &mut x);
        let rope = Rope::new(cfg.head_dim, cfg.rope_theta, pos);
        let mut s = Scratch::new(cfg, pos + 1);
        for (i, layer) in self.weights.layers.iter().enumerate() {
            self.attention_block(layer, &rope, &mut x, &mut s, cache, i, pos);
            self.ffn_block(layer, &mut x, &mut s);
        }
        cache.len = pos + 1;

        rmsnorm(&mut x, &self.weights.output_norm, cfg.rms_eps);
        Ok(x)
    }

    /// `tokens` as a sequence of their own from position 0, in a cache of their own:
    /// every position's [`Model::hidden`], `[token][hidden]` (an embedding's rows).
    pub fn hidden_states(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        let mut cache = self.new_cache(tokens.len())?;
        let mut out = Vec::with_capacity(tokens.len() * self.config.hidden_size);
        for &t in tokens {
            out.extend(self.hidden(t, &mut cache)?);
        }
        Ok(out)
    }

    /// `x += Wo · attention(...)`, writing this token's k and v into layer `li` of the
    /// cache at `pos`.
    #[allow(clippy::too_many_arguments)]
    fn attention_block(
        &self,
        layer: &LayerWeights,
        rope: &Rope,
        x: &mut [f32],
        s: &mut Scratch,
        cache: &mut KvCache,
        li: usize,
        pos: usize,
    ) {
        let cfg = &self.config;
        let (hd, kv_dim) = (cfg.head_dim, cfg.kv_dim());
        rmsnorm_into(x, &layer.attn_norm, cfg.rms_eps, &mut s.h);
        layer.wq.matvec(&s.h, &mut s.q);
        let k = &mut cache.keys[li][pos * kv_dim..][..kv_dim];
        let v = &mut cache.values[li][pos * kv_dim..][..kv_dim];
        layer.wk.matvec(&s.h, k);
        layer.wv.matvec(&s.h, v);
        if let Some([bq, bk, bv]) = &layer.qkv_bias {
            add_in_place(&mut s.q, bq);
            add_in_place(k, bk);
            add_in_place(v, bv);
        }
        if let Some([nq, nk]) = &layer.qk_norm {
            for head in s.q.chunks_exact_mut(hd) {
                rmsnorm(head, nq, cfg.rms_eps);
            }
            for head in k.chunks_exact_mut(hd) {
                rmsnorm(head, nk, cfg.rms_eps);
            }
        }
        rope.apply(&mut s.q);
        rope.apply(k);

        // Grouped-query attention: query head h reads KV head h / group.
        let group = cfg.n_heads / cfg.n_kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let (keys, values) = (&cache.keys[li], &cache.values[li]);
        for (h, (q, out)) in
            s.q.chunks_exact(hd)
                .zip(s.attn.chunks_exact_mut(hd))
                .enumerate()
        {
            let kv = KvHead {
                keys,
                values,
                kv_dim,
                offset: (h / group) * hd,
            };
            attend_head(q, &kv, scale, &mut s.scores, out);
        }
        layer.wo.matvec(&s.attn, &mut s.h);
        add_in_place(x, &s.h);
    }

    /// `x += Wdown · (silu(Wgate · h) ⊙ (Wup · h))`, `h = rmsnorm(x)`.
    fn ffn_block(&self, layer: &LayerWeights, x: &mut [f32], s: &mut Scratch) {
        rmsnorm_into(x, &layer.ffn_norm, self.config.rms_eps, &mut s.h);
        layer.w_gate.matvec(&s.h, &mut s.gate);
        layer.w_up.matvec(&s.h, &mut s.up);
        swiglu(&mut s.gate, &s.up);
        layer.w_down.matvec(&s.gate, &mut s.h);
        add_in_place(x, &s.h);
    }
}

/// Per-step buffers, sized once per forward call.
struct Scratch {
    /// Normed hidden state, then a block's output before the residual add.
    h: Vec<f32>,
    q: Vec<f32>,
    attn: Vec<f32>,
    scores: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
}

impl Scratch {
    fn new(cfg: &ModelConfig, context: usize) -> Scratch {
        Scratch {
            h: vec![0.0; cfg.hidden_size],
            q: vec![0.0; cfg.q_dim()],
            attn: vec![0.0; cfg.q_dim()],
            scores: vec![0.0; context],
            gate: vec![0.0; cfg.ffn_size],
            up: vec![0.0; cfg.ffn_size],
        }
    }
}
