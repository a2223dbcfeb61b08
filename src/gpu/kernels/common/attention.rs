//! What the decode attention designs of both families share: the designs' names
//! ([`AttentionVariant`]), a layer's inputs ([`AttentionInputs`]), the folded output
//! projection ([`WoFold`], [`OutputProjection`], W_o's codes binding) and the sizes and
//! grids every design's dispatches follow.

use super::q4_codes::{Codes, CodesRead};
use super::rope_kv::{HeadShape, KvBuffers};
use crate::gpu::kernels::{Binding, Dispatch, Slot};

/// W_o's codes binding (`binding`, read as `read`) with its accessors `code4(i)` (words
/// 4i..4i+3) and `wo_word(i)` (word i).
pub(crate) fn wo_codes_wgsl(read: CodesRead, binding: u32) -> String {
    read.decl(binding) + "fn wo_word(i: u32) -> u32 {\n    return code4(i / 4u)[i % 4u];\n}\n"
}

/// The output projection folded into attention: W_o's rows (the hidden size), how the
/// kernels read its codes (the storage buffer, or the texture copy the adapter's decode
/// GEMVs read: 16 bytes per lane and load on CPU adapters, against 4), and how the group
/// design spreads it over workgroups (the other designs ignore `blocks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WoFold {
    pub rows: usize,
    pub codes: CodesRead,
    pub blocks: WoBlocks,
}

impl WoFold {
    /// Can the output projection of `shape` be folded into its attention (any design)?
    pub fn can_fold(shape: HeadShape) -> bool {
        shape.head_dim.is_multiple_of(8) && (shape.n_heads * shape.head_dim).is_multiple_of(64)
    }

    /// The kernel slots of its bindings: codes, qparams, parts.
    pub(crate) fn slots(self) -> [Slot; 3] {
        [self.codes.slot(), Slot::Read, Slot::ReadWrite]
    }
}

/// How the group design spreads a folded W_o: blocks of `rows` W_o rows, one workgroup
/// per (KV head, block) (⌈hidden / rows⌉ blocks), `lanes` invocations per row taking its
/// code words in turn. A device-profile choice ([`crate::gpu::DeviceProfile::wo_blocks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WoBlocks {
    pub rows: u32,
    pub lanes: u32,
}

impl WoBlocks {
    /// Blocks of `hidden` rows.
    pub fn blocks(self, hidden: usize) -> u32 {
        hidden.div_ceil(self.rows.max(1) as usize) as u32
    }
}

/// Which design computes decode attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionVariant {
    /// One workgroup per (q head, split), norm + RoPE + KV write fused in: shapes the
    /// group and lanes designs cannot run (and CPU adapters folding W_o without subgroups).
    Workgroup,
    /// One workgroup per (KV head, split) for the whole GQA group, norm + RoPE + KV write
    /// fused in, W_o folded in per (KV head, block of rows): GPUs (head_dim a multiple of
    /// 4, a group that fits workgroup memory: [`AttentionVariant::fits`]).
    Group,
    /// Invocations without workgroup memory (a lane per q head for one split, per
    /// (split, KV head) for several), norm + RoPE + KV write fused in: CPU adapters
    /// (head_dim a multiple of 4).
    Lanes,
}

impl AttentionVariant {
    /// Its name in profiles and pipeline labels.
    pub fn name(self) -> &'static str {
        match self {
            AttentionVariant::Workgroup => "workgroup",
            AttentionVariant::Group => "group",
            AttentionVariant::Lanes => "lanes",
        }
    }
}

/// Bytes of the partial results of `shape` split every `split_len` positions: per head and
/// split, head_dim sums, the max score and the sum of exponentials (f32).
pub fn partials_bytes(shape: HeadShape, split_len: usize) -> u64 {
    (shape.n_heads * shape.context.div_ceil(split_len.max(1)) * (shape.head_dim + 2) * 4) as u64
}

/// The inputs of one layer's attention.
#[derive(Clone, Copy)]
pub struct AttentionInputs<'a> {
    /// The uniform with the step's position.
    pub step: &'a wgpu::Buffer,
    /// The QKV GEMV's output: q | k | v.
    pub qkv: &'a wgpu::Buffer,
    /// q and k norm weights (head_dim each; any small buffer without QK-norm).
    pub q_norm: &'a wgpu::Buffer,
    pub k_norm: &'a wgpu::Buffer,
    /// [`super::rope_kv::rope_inv_freq`].
    pub inv_freq: &'a wgpu::Buffer,
    pub cache: KvBuffers<'a>,
    /// Scores scratch: [`crate::gpu::forward::designs::Attention::scratch_bytes`] (read by the workgroup design only).
    pub scores: &'a wgpu::Buffer,
    /// The folded output projection: required exactly when the kernel folds it.
    pub wo: Option<OutputProjection<'a>>,
}

/// The folded output projection's buffers: W_o (Q4 g64, hidden × n_heads·head_dim: its
/// codes as [`WoFold::codes`] reads them) and `parts` (at most n_heads × hidden f32:
/// [`crate::gpu::forward::designs::Attention::parts_bytes`]), where part p holds `W_o[:, cols] · o[cols]` for the
/// columns of its heads ([`crate::gpu::forward::designs::Attention::part_heads`]).
#[derive(Clone, Copy)]
pub struct OutputProjection<'a> {
    pub codes: Codes<'a>,
    pub qparams: &'a wgpu::Buffer,
    pub parts: &'a wgpu::Buffer,
}

impl<'a> OutputProjection<'a> {
    /// The bindings in slot order, the codes checked against how `wo` reads them.
    pub(crate) fn bindings(self, wo: WoFold) -> [Binding<'a>; 3] {
        let texture = wo.codes != CodesRead::Buffer;
        [
            self.codes.binding(texture, "attention W_o"),
            Binding::Buffer(self.qparams),
            Binding::Buffer(self.parts),
        ]
    }
}

/// A step's dispatches with their grids, in order: at most two, and built every token,
/// so without allocating.
pub type DispatchesAt<'a> =
    std::iter::Flatten<std::array::IntoIter<Option<(&'a Dispatch, [u32; 3])>, 2>>;

/// [`DispatchesAt`] of up to two dispatches.
pub fn dispatches_at<'a>(d: [Option<(&'a Dispatch, [u32; 3])>; 2]) -> DispatchesAt<'a> {
    d.into_iter().flatten()
}
