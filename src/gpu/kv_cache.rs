//! The KV cache: per layer one K and one V buffer of f16 values packed in u32 pairs,
//! laid out [kv head][position][head_dim] (see shaders/soft/attention_lanes.wgsl).

use super::device::GpuContext;
use super::kernels::common::rope_kv::HeadShape;
use crate::config::ModelConfig;
use crate::error::{Error, Result};

pub struct KvCache {
    pub k: Vec<wgpu::Buffer>,
    pub v: Vec<wgpu::Buffer>,
    pub shape: HeadShape,
}

impl KvCache {
    /// The attention shape of `cfg` with a `context`-position cache.
    pub fn shape(cfg: &ModelConfig, context: usize) -> HeadShape {
        HeadShape {
            n_heads: cfg.n_heads,
            n_kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            context,
        }
    }

    /// Bytes of one layer's K (or V) buffer.
    pub fn layer_bytes(cfg: &ModelConfig, context: usize) -> u64 {
        Self::shape(cfg, context).cache_bytes()
    }

    pub fn new(ctx: &GpuContext, cfg: &ModelConfig, context: usize) -> Result<KvCache> {
        let shape = Self::shape(cfg, context);
        shape.check()?;
        let bytes = shape.cache_bytes();
        let mut k = Vec::with_capacity(cfg.n_layers);
        let mut v = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            k.push(ctx.storage(&format!("blk.{i}.k_cache"), bytes)?);
            v.push(ctx.storage(&format!("blk.{i}.v_cache"), bytes)?);
        }
        Ok(KvCache { k, v, shape })
    }
}

/// The rows of a span of positions, as a session snapshot stores them: per layer K then V,
/// per KV head `count · head_dim` f16 (the buffers' own `[kv head][position][head_dim]`
/// order, each head's span contiguous in the buffer).
impl KvCache {
    /// Bytes of one KV head's span of `count` positions.
    fn run_bytes(&self, count: usize) -> u64 {
        (count * self.shape.head_dim * 2) as u64
    }

    /// Where each contiguous run of a span from `start` begins, in the snapshot's order:
    /// (buffer, byte offset).
    fn runs(&self, start: usize) -> Vec<(&wgpu::Buffer, u64)> {
        let (hd, ctx) = (self.shape.head_dim, self.shape.context);
        let planes = self.k.iter().zip(&self.v).flat_map(|(k, v)| [k, v]);
        planes
            .flat_map(|b| {
                (0..self.shape.n_kv_heads).map(move |h| (b, ((h * ctx + start) * hd * 2) as u64))
            })
            .collect()
    }

    /// Contiguous runs of a span: one per layer, K/V and KV head.
    pub fn runs_count(&self) -> usize {
        2 * self.k.len() * self.shape.n_kv_heads
    }

    /// Bytes of the span's rows.
    pub fn span_bytes(&self, count: usize) -> u64 {
        self.runs_count() as u64 * self.run_bytes(count)
    }

    fn check_span(&self, start: usize, count: usize) -> Result<()> {
        // Copies move whole words: an odd head_dim with an odd start is not a word offset.
        if start + count > self.shape.context || (self.shape.head_dim % 2 == 1) {
            return Err(Error::InvalidArgument(format!(
                "KV rows {start}..{} of a {}-position cache of head_dim {}",
                start + count,
                self.shape.context,
                self.shape.head_dim
            )));
        }
        Ok(())
    }

    /// Copy the span's rows into `staging` (from offset 0), in the snapshot's order.
    pub fn encode_read(
        &self,
        enc: &mut wgpu::CommandEncoder,
        start: usize,
        count: usize,
        staging: &wgpu::Buffer,
    ) -> Result<()> {
        self.check_span(start, count)?;
        let n = self.run_bytes(count);
        for (i, (buf, offset)) in self.runs(start).into_iter().enumerate() {
            enc.copy_buffer_to_buffer(buf, offset, staging, i as u64 * n, n);
        }
        Ok(())
    }

    /// Write `rows` (the span's rows in the snapshot's order) at positions `start..`.
    pub fn write(
        &self,
        queue: &wgpu::Queue,
        start: usize,
        count: usize,
        rows: &[u8],
    ) -> Result<()> {
        self.check_span(start, count)?;
        let n = self.run_bytes(count) as usize;
        if rows.len() as u64 != self.span_bytes(count) {
            return Err(Error::InvalidArgument(format!(
                "{} bytes of KV rows for {count} positions, {} expected",
                rows.len(),
                self.span_bytes(count)
            )));
        }
        if n == 0 {
            return Ok(());
        }
        for ((buf, offset), run) in self.runs(start).into_iter().zip(rows.chunks_exact(n)) {
            queue.write_buffer(buf, offset, run);
        }
        Ok(())
    }
}
