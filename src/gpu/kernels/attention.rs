//! Decode attention for one query token (GQA, softmax), split along the context into
//! chunks of `split_len` positions when the history is longer than one chunk
//! (flash-decoding: the splits write partial results that shaders/attention_combine.wgsl
//! merges). Three designs behind one wrapper, chosen per adapter:
//! - GPUs: one workgroup per (KV head, split) computing its whole GQA group, each key and
//!   value loaded once for the group's heads, with the q/k-norm + RoPE + KV-cache write
//!   fused in ([`AttentionGroup`], shaders/attention_group.wgsl). W_o folds in as one part
//!   per KV head (its group's share of W_o · o, written to a `parts` buffer that the next
//!   GEMV adds to the residual), spread over workgroups per (KV head, block of W_o rows).
//! - Where the group design cannot run a shape: one workgroup per (q head, split), norm +
//!   RoPE + KV write fused in too (shaders/attention.wgsl); W_o folds in here as one part
//!   per q head (shaders/attention_wo.wgsl).
//! - CPU adapters: no workgroup memory or barriers, the q/k-norm + RoPE + KV write fused
//!   in too ([`AttentionLanes`]): a lane per q head while the history fits one split,
//!   then a lane per (split, KV head) for the whole GQA group, each key loaded once for
//!   all the group's heads (loads are what costs on CPU adapters). W_o folds in here too
//!   (8-wide subgroups): the lane of a head projects its output, the workgroup's heads
//!   summed into one part (shaders/soft/attention_lanes_wo.wgsl), after several splits in the
//!   lanes design's own combine (shaders/soft/attention_lanes_combine.wgsl).

use super::attention_group::{AttentionGroup, GroupLayout, WoBlocks};
use super::gemv_q4::{Codes, CodesRead, Q4_UNPACK_WGSL};
use super::rope_kv::{rope_inputs_wgsl, HeadShape, KvBuffers, ROPE_COMMON_WGSL};
use super::soft::attention_lanes::{AttentionLanes, LanesDispatch};
use super::{Binding, Dispatch, KernelPipeline, Slot, REDUCE64_WGSL, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention.wgsl");
const COMBINE_WGSL: &str = include_str!("../../../shaders/attention_combine.wgsl");
const WO_WGSL: &str = include_str!("../../../shaders/attention_wo.wgsl");

/// The W_o fold: its bindings (from binding `first` on: codes, qparams, parts), `o_head`
/// (`o_len` floats) and shaders/attention_wo.wgsl; unfolded, a stub of what the kernels
/// call.
fn wo_source(wo: Option<WoFold>, first: u32, o_len: usize) -> String {
    let o_head = format!("var<workgroup> o_head: array<f32, {o_len}>;\n");
    let Some(wo) = wo else {
        return "const WO_FOLD = false;\n\
                fn project_head(h: u32, lid: u32) {}\n"
            .to_string()
            + &o_head;
    };
    let o4 = "fn fold_o4(i: u32) -> vec4<f32> {\n    \
              return vec4<f32>(o_head[4u * i], o_head[4u * i + 1u], o_head[4u * i + 2u], \
              o_head[4u * i + 3u]);\n}\n";
    [o_head.as_str(), o4, &wo_bindings_wgsl(wo, first)].concat()
}

/// `const WO_FOLD = true`, W_o's bindings (from binding `first` on: codes, qparams as
/// `wo_qparams`, `parts`) and shaders/attention_wo.wgsl with the code unpacking it needs.
pub(crate) fn wo_bindings_wgsl(wo: WoFold, first: u32) -> String {
    let bindings = format!(
        "const WO_FOLD = true;\n{}\
         @group(0) @binding({}) var<storage, read> wo_qparams: array<u32>;\n\
         @group(0) @binding({}) var<storage, read_write> parts: array<f32>;\n",
        wo_codes_wgsl(wo.codes, first),
        first + 1,
        first + 2
    );
    [&bindings, Q4_UNPACK_WGSL, WO_WGSL].concat()
}

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
    /// The kernel slots of its bindings: codes, qparams, parts.
    pub(super) fn slots(self) -> [Slot; 3] {
        [self.codes.slot(), Slot::Read, Slot::ReadWrite]
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

    /// Can this design run `shape` (with W_o folded in when `fold`)? The workgroup design
    /// runs every shape [`HeadShape::check`] accepts; the lanes design needs head_dim % 4
    /// (its fold, 8-wide subgroups: [`crate::gpu::DeviceProfile::lanes_fold`]); the group
    /// design head_dim % 4 and a group that fits workgroup memory. Folding W_o needs
    /// [`Attention::can_fold_output`] in every design.
    pub fn fits(self, shape: HeadShape, fold: bool) -> bool {
        let folds = !fold || Attention::can_fold_output(shape);
        folds
            && match self {
                AttentionVariant::Workgroup => true,
                AttentionVariant::Group => GroupLayout::of(shape).is_some(),
                AttentionVariant::Lanes => shape.head_dim.is_multiple_of(4),
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
    /// Scores scratch: [`Attention::scratch_bytes`] (read by the workgroup design only).
    pub scores: &'a wgpu::Buffer,
    /// The folded output projection: required exactly when the kernel folds it.
    pub wo: Option<OutputProjection<'a>>,
}

/// The folded output projection's buffers: W_o (Q4 g64, hidden × n_heads·head_dim: its
/// codes as [`WoFold::codes`] reads them) and `parts` (at most n_heads × hidden f32:
/// [`Attention::parts_bytes`]), where part p holds `W_o[:, cols] · o[cols]` for the
/// columns of its heads ([`Attention::part_heads`]).
#[derive(Clone, Copy)]
pub struct OutputProjection<'a> {
    pub codes: Codes<'a>,
    pub qparams: &'a wgpu::Buffer,
    pub parts: &'a wgpu::Buffer,
}

impl<'a> OutputProjection<'a> {
    /// The bindings in slot order, the codes checked against how `wo` reads them.
    pub(super) fn bindings(self, wo: WoFold) -> [Binding<'a>; 3] {
        let texture = wo.codes != CodesRead::Buffer;
        [
            self.codes.binding(texture, "attention W_o"),
            Binding::Buffer(self.qparams),
            Binding::Buffer(self.parts),
        ]
    }
}

/// The dispatches of one layer's attention; the split count, hence the grid, follows the
/// position.
pub enum AttentionDispatch {
    /// `single` when the history fits one split, else `split` then `combine`.
    Workgroup {
        single: Dispatch,
        split: Dispatch,
        combine: Dispatch,
    },
    /// `single` when the history fits one split, else `split` then `combine`: grids of KV
    /// heads × splits (with W_o folded in: one split KV heads × 1 × blocks, the combine
    /// KV heads × blocks).
    Group {
        single: Dispatch,
        split: Dispatch,
        combine: Dispatch,
    },
    /// `single` when the history fits one split, else `split` then `combine`.
    Lanes {
        attend: LanesDispatch,
        combine: Dispatch,
    },
}

/// The kernels of one design.
enum Design {
    Workgroup(KernelPipeline),
    Group(AttentionGroup),
    Lanes(Box<AttentionLanes>),
}

pub struct Attention {
    design: Design,
    /// The combine after several splits (not for the lanes and group designs with W_o
    /// folded in).
    combine: Option<KernelPipeline>,
    pub shape: HeadShape,
    pub split_len: usize,
    /// The folded W_o, when folded.
    pub wo: Option<WoFold>,
    /// Consecutive q heads per part of the folded projection: 1, or with W_o folded into
    /// the lanes design its workgroups' heads ([`AttentionLanes::part_heads`]), into the
    /// group design a GQA group (a part per KV head).
    part_heads: usize,
}

impl Attention {
    /// `qk_norm`: apply the per-head RMSNorm (weights bound at dispatch) with `eps`. The
    /// profile's design ([`crate::gpu::DeviceProfile::attention_for`]).
    pub fn new(
        ctx: &GpuContext,
        shape: HeadShape,
        qk_norm: bool,
        eps: f32,
        split_len: usize,
    ) -> Result<Attention> {
        let variant = ctx.profile.attention_for(shape, false);
        Self::with_variant(ctx, variant, shape, qk_norm, eps, split_len)
    }

    /// [`Attention::new`] in `variant` (any variant runs on any adapter).
    pub fn with_variant(
        ctx: &GpuContext,
        variant: AttentionVariant,
        shape: HeadShape,
        qk_norm: bool,
        eps: f32,
        split_len: usize,
    ) -> Result<Attention> {
        Self::build(ctx, variant, shape, (qk_norm, eps), split_len, None)
    }

    /// [`Attention::with_variant`] with the output projection `wo` folded in: needs
    /// head_dim % 8 == 0 and n_heads · head_dim % 64 == 0 (whole Q4 code words per head,
    /// whole groups per row).
    pub fn with_output_projection(
        ctx: &GpuContext,
        variant: AttentionVariant,
        shape: HeadShape,
        qk_norm: bool,
        eps: f32,
        split_len: usize,
        wo: WoFold,
    ) -> Result<Attention> {
        let hidden = wo.rows;
        let q_dim = shape.n_heads * shape.head_dim;
        if !shape.head_dim.is_multiple_of(8)
            || !q_dim.is_multiple_of(64)
            || hidden == 0
            || hidden > u32::MAX as usize
        {
            return Err(Error::InvalidArgument(format!(
                "W_o fold: head_dim {} must be a multiple of 8, n_heads·head_dim {q_dim} of \
                 64, hidden {hidden} positive",
                shape.head_dim
            )));
        }
        Self::build(ctx, variant, shape, (qk_norm, eps), split_len, Some(wo))
    }

    /// Can the output projection of `shape` be folded in?
    pub fn can_fold_output(shape: HeadShape) -> bool {
        shape.head_dim.is_multiple_of(8) && (shape.n_heads * shape.head_dim).is_multiple_of(64)
    }

    /// `norm`: (qk_norm, eps).
    fn build(
        ctx: &GpuContext,
        variant: AttentionVariant,
        shape: HeadShape,
        (qk_norm, eps): (bool, f32),
        split_len: usize,
        wo: Option<WoFold>,
    ) -> Result<Attention> {
        shape.check()?;
        if split_len == 0 || split_len > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "attention split length {split_len}: must be positive"
            )));
        }
        let mut constants = shape.constants();
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        constants.push(("SPLIT_LEN", split_len as f64));
        let folded = wo.is_some();
        // Folded: q/k norm and inv_freq as uniforms, W_o's codes, qparams and the parts
        // as 3 more bindings (8 storage bindings in all at most).
        let wo_slots: Vec<Slot> = wo.iter().flat_map(|w| w.slots()).collect();
        let wo_constants: Vec<_> = wo.map(|w| ("HIDDEN", w.rows as f64)).into_iter().collect();
        constants.extend(wo_constants.iter().copied());
        let design = match variant {
            AttentionVariant::Workgroup => {
                let small = rope_inputs_wgsl(folded, qk_norm, shape.head_dim);
                let source = [
                    STEP_WGSL,
                    REDUCE64_WGSL,
                    ROPE_COMMON_WGSL,
                    &small,
                    &wo_source(wo, 9, shape.head_dim),
                    WGSL,
                ]
                .concat();
                let small_slot = if folded { Slot::Uniform } else { Slot::Read };
                let mut slots = vec![Slot::Uniform, Slot::Read];
                slots.extend([small_slot; 3]);
                slots.extend([Slot::ReadWrite; 4]);
                slots.extend(&wo_slots);
                let label = if folded {
                    "attention/workgroup+wo"
                } else {
                    "attention/workgroup"
                };
                let attend = KernelPipeline::new(ctx, label, &source, &slots, &constants);
                Design::Workgroup(attend)
            }
            AttentionVariant::Group => {
                let group = AttentionGroup::new(ctx, shape, (qk_norm, eps), split_len, wo)?;
                Design::Group(group)
            }
            AttentionVariant::Lanes => {
                let lanes = AttentionLanes::new(ctx, shape, (qk_norm, eps), split_len, wo)?;
                Design::Lanes(Box::new(lanes))
            }
        };
        // A part per head; with W_o folded into the lanes design per workgroup of its
        // heads, into the group design per GQA group (both combine their splits
        // themselves: `LanesDispatch::merge`, `GroupDispatch::merge`).
        let part_heads = match (&design, folded) {
            (Design::Lanes(_), true) => AttentionLanes::part_heads(shape),
            (Design::Group(_), true) => shape.n_heads / shape.n_kv_heads,
            _ => 1,
        };
        let own_combine = folded && !matches!(design, Design::Workgroup(_));
        let combine = (!own_combine).then(|| {
            let mut constants = vec![
                ("N_HEADS", shape.n_heads as f64),
                ("HD", shape.head_dim as f64),
                ("SPLIT_LEN", split_len as f64),
            ];
            constants.extend(wo_constants);
            let mut slots = vec![Slot::Uniform, Slot::Read, Slot::ReadWrite];
            slots.extend(&wo_slots);
            let source = [STEP_WGSL, &wo_source(wo, 3, shape.head_dim), COMBINE_WGSL].concat();
            let label = if folded {
                "attention_combine+wo"
            } else {
                "attention_combine"
            };
            KernelPipeline::new(ctx, label, &source, &slots, &constants)
        });
        Ok(Attention {
            design,
            combine,
            shape,
            split_len,
            wo,
            part_heads,
        })
    }

    /// Bytes of the scores scratch buffer: `n_heads · context` f32.
    pub fn scratch_bytes(&self) -> u64 {
        (self.shape.n_heads * self.shape.context * 4) as u64
    }

    /// Bytes of the partial-results buffer this kernel needs (at least).
    pub fn partials_bytes(&self) -> u64 {
        partials_bytes(self.shape, self.split_len)
    }

    /// Bytes of the folded projection's `parts` buffer: n_heads × `hidden` f32 (at most a
    /// part per head: [`Attention::parts`]).
    pub fn parts_bytes(shape: HeadShape, hidden: usize) -> u64 {
        (shape.n_heads * hidden * 4) as u64
    }

    /// The parts the folded projection writes (whose sum is W_o · o): one per
    /// [`Attention::part_heads`] range, in order.
    pub fn parts(&self) -> usize {
        let group = self.shape.n_heads / self.shape.n_kv_heads;
        self.shape.n_kv_heads * group.div_ceil(self.part_heads)
    }

    /// The q heads whose projections part `p` sums: consecutive heads of one GQA group
    /// (all of them, or a chunk of the lanes design's workgroup width), or one head.
    pub fn part_heads(&self, p: usize) -> std::ops::Range<usize> {
        let group = self.shape.n_heads / self.shape.n_kv_heads;
        let chunks = group.div_ceil(self.part_heads);
        let first = (p / chunks) * group + (p % chunks) * self.part_heads;
        let count = self.part_heads.min(group - (p % chunks) * self.part_heads);
        first..first + count
    }

    /// Splits for the step at position `pos`.
    pub fn splits_at(&self, pos: usize) -> u32 {
        (pos / self.split_len + 1) as u32
    }

    /// The dispatches for one layer: `out` receives n_heads · head_dim floats (and, when
    /// folded, `inputs.wo`'s parts the projection); `partials` is at least
    /// [`Attention::partials_bytes`] of scratch. This step's k and v are written to
    /// `inputs.cache` at the step's position.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        inputs: AttentionInputs<'_>,
        partials: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> AttentionDispatch {
        let i = inputs;
        assert_eq!(
            i.wo.is_some(),
            self.wo.is_some(),
            "attention: W_o is bound exactly when the kernel folds it"
        );
        let wo: Vec<Binding> = match (i.wo, self.wo) {
            (Some(p), Some(wo)) => p.bindings(wo).to_vec(),
            _ => vec![],
        };
        let heads = self.shape.n_heads as u32;
        let mut combine: Vec<Binding> = [i.step, partials, out].map(Binding::Buffer).to_vec();
        combine.extend(wo.iter().cloned());
        let combine = self
            .combine
            .as_ref()
            .map(|k| k.dispatch_bindings(ctx, &combine, heads));
        match &self.design {
            Design::Workgroup(kernel) => {
                let attend = |dst| {
                    let buffers = [
                        i.step, i.qkv, i.q_norm, i.k_norm, i.inv_freq, i.cache.k, i.cache.v,
                        i.scores, dst,
                    ];
                    let mut b: Vec<Binding> = buffers.map(Binding::Buffer).to_vec();
                    b.extend(wo.iter().cloned());
                    kernel.dispatch_bindings(ctx, &b, heads)
                };
                AttentionDispatch::Workgroup {
                    single: attend(out),
                    split: attend(partials),
                    combine: combine.expect("the workgroup design's combine"),
                }
            }
            Design::Group(kernel) => {
                let d = kernel.dispatch(ctx, &i, partials, out);
                AttentionDispatch::Group {
                    single: d.single,
                    split: d.split,
                    combine: combine
                        .or(d.merge)
                        .expect("the group design combines its splits where W_o folds"),
                }
            }
            Design::Lanes(kernel) => {
                let mut attend = kernel.dispatch(ctx, &i, out, partials, &wo);
                let merge = attend.merge.take();
                let combine = combine
                    .or(merge)
                    .expect("the lanes design combines its splits where W_o folds");
                AttentionDispatch::Lanes { attend, combine }
            }
        }
    }

    /// The design this kernel runs.
    pub fn variant(&self) -> AttentionVariant {
        match self.design {
            Design::Workgroup(_) => AttentionVariant::Workgroup,
            Design::Group(_) => AttentionVariant::Group,
            Design::Lanes(_) => AttentionVariant::Lanes,
        }
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

impl AttentionDispatch {
    /// The dispatches of the step at `pos`, in order, with their grids (one, or split +
    /// combine).
    pub fn at(&self, kernel: &Attention, pos: usize) -> DispatchesAt<'_> {
        let splits = kernel.splits_at(pos);
        dispatches_at(match self {
            AttentionDispatch::Workgroup { single, .. }
            | AttentionDispatch::Group { single, .. }
                if splits == 1 =>
            {
                [Some((single, single.grid)), None]
            }
            // q heads (workgroup) or KV heads (group) along x, splits along y.
            AttentionDispatch::Workgroup { split, combine, .. }
            | AttentionDispatch::Group { split, combine, .. } => {
                let [heads, _, _] = split.grid;
                [
                    Some((split, [heads, splits, 1])),
                    Some((combine, combine.grid)),
                ]
            }
            AttentionDispatch::Lanes { attend, .. } if splits == 1 => {
                [Some((&attend.single, attend.single.grid)), None]
            }
            AttentionDispatch::Lanes { attend, combine } => [
                Some((&attend.split, AttentionLanes::grid(kernel.shape, splits))),
                Some((combine, combine.grid)),
            ],
        })
    }

    /// Encode the attention of the step at `pos`.
    pub fn encode(&self, kernel: &Attention, pos: usize, pass: &mut wgpu::ComputePass<'_>) {
        for (d, grid) in self.at(kernel, pos) {
            d.encode_grid(pass, grid);
        }
    }
}
