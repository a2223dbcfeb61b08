//! What each kernel of the decode step reads from memory (DRAM on a GPU) per dispatch:
//! the bytes behind a kernel's effective GB/s in `bench --json` and `gpu-check`.
//!
//! - GEMVs: the Q4 matrix (codes K/2 and qparams K/16 bytes per row) and x (f32); with a
//!   fused RMSNorm (qkv, gate_up, head) the norm weights; with a residual add (o, down) the
//!   residual; with the attention's W_o parts added to x (folded), those parts.
//! - attention (one dispatch per layer, or split + combine): the f16 K and V of positions
//!   0..=pos (2 · kv_dim · (pos + 1) · 2 bytes) and the QKV output; with W_o folded in its
//!   Q4 matrix (hidden × q). After several splits the combine reads the splits' partial
//!   results (n_heads · splits · (head_dim + 2) f32) and the folded W_o, the splits the rest.
//!   The group design's W_o blocks each read their rows once and the same K, V and
//!   partials, counted once (the re-reads assumed to come from cache).
//! - embed: one Q4 row of the embedding; argmax: the logits, or on GPUs (fused into the
//!   head) the head workgroups' (index, value) partials.
//!
//! Outputs written are not counted (a few KB per dispatch; reads dominate).

use super::step::StepKernel;
use crate::config::ModelConfig;
use crate::gpu::kernels::Dispatch;

/// One dispatch of the step at a position, named as `KernelTime::kernel` says.
pub(super) struct Entry<'a> {
    pub(super) name: String,
    pub(super) dispatch: &'a Dispatch,
    /// Its grid at that position (what `GpuModel::profile_step` encodes, natively).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(super) grid: [u32; 3],
    pub(super) bytes_read: u64,
}

/// Bytes of a Q4 g64 matrix of `rows` × `cols` (codes and qparams).
pub fn q4_bytes(rows: usize, cols: usize) -> u64 {
    (rows * cols / 2 + rows * cols / 16) as u64
}

/// What shapes the step's reads beyond the config.
#[derive(Clone, Copy, Debug)]
pub(super) struct StepShape {
    /// W_o folded into attention (its parts then added to gate/up's x).
    pub(super) folded: bool,
    /// Parts the folded projection writes.
    pub(super) parts: usize,
    pub(super) split_len: usize,
    /// Workgroups of the head whose fused argmax's partials the argmax reduces (`None`:
    /// the argmax reads the logits).
    pub(super) argmax_partials: Option<u32>,
}

/// Bytes one dispatch of `kernel` reads at `pos` (`part`: which of attention's).
pub(super) fn bytes_read(
    cfg: &ModelConfig,
    s: StepShape,
    kernel: StepKernel,
    pos: usize,
    part: AttentionPart,
) -> u64 {
    let (h, f, q, kv) = (cfg.hidden_size, cfg.ffn_size, cfg.q_dim(), cfg.kv_dim());
    let f32s = |n: usize| 4 * n as u64;
    let wo = if s.folded { q4_bytes(h, q) } else { 0 };
    let kv_cache = (2 * kv * (pos + 1) * 2) as u64 + f32s(q + 2 * kv);
    let splits = pos / s.split_len.max(1) + 1;
    let partials = f32s(cfg.n_heads * splits * (cfg.head_dim + 2));
    let parts = if s.folded { f32s(s.parts * h) } else { 0 };
    match (kernel, part) {
        (StepKernel::Embed, _) => q4_bytes(1, h),
        (StepKernel::Qkv, _) => q4_bytes(q + 2 * kv, h) + f32s(2 * h),
        (StepKernel::Output, _) => q4_bytes(h, q) + f32s(q + h),
        (StepKernel::GateUp, _) => q4_bytes(2 * f, h) + f32s(2 * h) + parts,
        (StepKernel::Down, _) => q4_bytes(h, f) + f32s(f + h),
        (StepKernel::Head, _) => q4_bytes(cfg.vocab_size, h) + f32s(2 * h),
        (StepKernel::Argmax, _) => match s.argmax_partials {
            Some(groups) => 8 * u64::from(groups),
            None => f32s(cfg.vocab_size),
        },
        (StepKernel::Attention, AttentionPart::Whole) => kv_cache + wo,
        (StepKernel::Attention, AttentionPart::Split) => kv_cache,
        (StepKernel::Attention, AttentionPart::Combine) => partials + wo,
    }
}

/// Which dispatch of a step entry is meant (attention has up to two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AttentionPart {
    /// The entry's only dispatch.
    Whole,
    /// The splits, before the combine.
    Split,
    Combine,
}
