//! The KV cache: per layer one K and one V buffer of f16 values packed in u32 pairs,
//! laid out [kv head][position][head_dim] (see shaders/soft/attention_lanes.wgsl).

use super::device::GpuContext;
use super::kernels::rope_kv::HeadShape;
use crate::config::ModelConfig;
use crate::error::Result;

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
