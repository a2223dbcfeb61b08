//! The engine's KV rows in and out, for session snapshots (`crate::session`): how the
//! backend stores them ([`KvLayout`]), the rows bit for bit, and the string that says
//! where such rows are valid.

use super::{Engine, Inner};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// How the backend stores a position's K and V rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// `[position][kv_dim]` f32 per layer and K/V (the CPU backends).
    F32,
    /// `[kv head][position][head_dim]` f16 per layer and K/V (the GPU cache).
    F16Heads,
}

/// The KV cache's shape and element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvLayout {
    pub rows: RowKind,
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl KvLayout {
    /// Bytes of one position's K and V rows over all layers.
    pub fn bytes_per_position(&self) -> usize {
        let element = match self.rows {
            RowKind::F32 => 4,
            RowKind::F16Heads => 2,
        };
        2 * self.layers * self.kv_heads * self.head_dim * element
    }

    /// Contiguous runs a span of positions is stored in: one per layer and K/V plane
    /// (f32 rows), or per layer, plane and KV head (the GPU's).
    pub fn runs(&self) -> usize {
        match self.rows {
            RowKind::F32 => 2 * self.layers,
            RowKind::F16Heads => 2 * self.layers * self.kv_heads,
        }
    }

    /// Bytes of `count` positions (checked: a hostile count is an error, not a wrap).
    pub fn bytes_for(&self, count: usize) -> Option<usize> {
        count.checked_mul(self.bytes_per_position())
    }
}

/// Where the fast CPU backend's rows are valid: every kernel sums in one order (native
/// and wasm alike), so only the precision of matrix inputs matters.
pub fn cpu_rows_tag(precision: crate::cpu::fast::Precision) -> String {
    format!("cpu/{}", precision.name())
}

/// Where a GPU model's f16 rows are valid: its profile (the kernels that wrote them) on
/// its adapter.
pub fn gpu_rows_tag(ctx: &crate::gpu::ProfiledContext) -> String {
    format!("gpu/{}/{}", ctx.profile.name, ctx.adapter_label())
}

/// The layout of `config`'s rows stored as `rows`.
pub fn layout(config: &crate::ModelConfig, rows: RowKind) -> KvLayout {
    KvLayout {
        rows,
        layers: config.n_layers,
        kv_heads: config.n_kv_heads,
        head_dim: config.head_dim,
    }
}

impl Engine {
    /// Hex SHA-256 identity of the loaded model ([`crate::format::model_fingerprint`]).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// How this backend stores its KV rows.
    pub fn kv_layout(&self) -> KvLayout {
        let rows = match &self.inner {
            Inner::Reference { .. } | Inner::Cpu { .. } => RowKind::F32,
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(_) => RowKind::F16Heads,
        };
        layout(&self.config, rows)
    }

    /// Where this backend's rows are valid (a snapshot's `backend`).
    pub fn kv_rows_tag(&self) -> String {
        match &self.inner {
            Inner::Reference { model, .. } => format!("reference/{}", model.weights.mode.name()),
            Inner::Cpu { model, .. } => cpu_rows_tag(model.precision()),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => gpu_rows_tag(model.gpu_context()),
        }
    }

    /// The KV rows of positions `start..start + count` (held ones), in
    /// [`Engine::kv_layout`]'s order.
    pub fn read_kv(&self, start: usize, count: usize) -> Result<Vec<u8>> {
        if start + count > self.pos {
            return Err(Error::InvalidArgument(format!(
                "KV rows {start}..{} past the {} positions held",
                start + count,
                self.pos
            )));
        }
        match &self.inner {
            Inner::Reference { cache, .. } | Inner::Cpu { cache, .. } => {
                Ok(cache.rows(start, count))
            }
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => model.read_kv(start, count),
        }
    }

    /// Write rows read by [`Engine::read_kv`] (of this backend) at `start` (at most the
    /// positions held): the engine then holds `start + count` positions, as if it had
    /// run their tokens.
    pub fn write_kv(&mut self, start: usize, count: usize, rows: &[u8]) -> Result<()> {
        if start > self.pos || start + count > self.context {
            return Err(Error::ContextTooLong {
                position: start + count,
                context: self.context,
            });
        }
        match &mut self.inner {
            Inner::Reference { cache, .. } | Inner::Cpu { cache, .. } => {
                cache.truncate(start);
                cache.write_rows(start, count, rows)?;
            }
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Gpu(model) => model.write_kv(start, count, rows)?,
        }
        self.pos = start + count;
        Ok(())
    }
}
