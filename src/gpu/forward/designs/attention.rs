//! Which design computes decode attention ([`Attention`]), as [`AttentionVariant`]
//! names it, split along the context into chunks of `split_len` positions when the
//! history is longer than one chunk (flash-decoding: the splits write partial results
//! that a combine merges):
//! - GPUs: one workgroup per (KV head, split) computing its whole GQA group, each key and
//!   value loaded once for the group's heads, with the q/k-norm + RoPE + KV-cache write
//!   fused in (`kernels::attention_group`, shaders/attention_group.wgsl). W_o folds in
//!   as one part per KV head (its group's share of W_o · o, written to a `parts` buffer
//!   that the next GEMV adds to the residual), spread over workgroups per (KV head, block
//!   of W_o rows).
//! - Where the group design cannot run a shape: one workgroup per (q head, split), norm +
//!   RoPE + KV write fused in too (`kernels::attention`, shaders/attention.wgsl); W_o
//!   folds in here as one part per q head (shaders/attention_wo.wgsl).
//! - CPU adapters: no workgroup memory or barriers, the q/k-norm + RoPE + KV write fused
//!   in too (`kernels::soft::attention_lanes`): a lane per q head while the history fits
//!   one split, then a lane per (split, KV head) for the whole GQA group, each key loaded
//!   once for all the group's heads (loads are what costs on CPU adapters). W_o folds in
//!   here too (8-wide subgroups): the lane of a head projects its output, the
//!   workgroup's heads summed into one part (shaders/soft/attention_lanes_wo.wgsl), after
//!   several splits in the lanes design's own combine
//!   (shaders/soft/attention_lanes_combine.wgsl).

use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::attention::{combine_kernel, workgroup_kernel};
use crate::gpu::kernels::attention_group::{AttentionGroup, GroupLayout};
use crate::gpu::kernels::common::attention::{
    dispatches_at, partials_bytes, AttentionInputs, AttentionVariant, DispatchesAt, WoFold,
};
use crate::gpu::kernels::common::rope_kv::HeadShape;
use crate::gpu::kernels::soft::attention_lanes::{AttentionLanes, LanesDispatch};
use crate::gpu::kernels::{Binding, Dispatch, KernelPipeline, Slot};
use crate::gpu::profiled::ProfiledContext;

/// Which designs can run which shapes (the designs are wired here).
impl AttentionVariant {
    /// Can this design run `shape` (with W_o folded in when `fold`)? The workgroup design
    /// runs every shape [`HeadShape::check`] accepts; the lanes design needs head_dim % 4
    /// (its fold, 8-wide subgroups: [`crate::gpu::DeviceProfile::lanes_fold`]); the group
    /// design head_dim % 4 and a group that fits workgroup memory. Folding W_o needs
    /// [`WoFold::can_fold`] in every design.
    pub fn fits(self, shape: HeadShape, fold: bool) -> bool {
        let folds = !fold || WoFold::can_fold(shape);
        folds
            && match self {
                AttentionVariant::Workgroup => true,
                AttentionVariant::Group => GroupLayout::of(shape).is_some(),
                AttentionVariant::Lanes => shape.head_dim.is_multiple_of(4),
            }
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
    /// `single` when the history fits one split, else `split` then `combine` (the
    /// design's merge): grids of KV heads × splits, the combine q heads (with W_o folded
    /// in: one split KV heads × 1 × blocks, the combine KV heads × blocks).
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
        ctx: &ProfiledContext,
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
        ctx: &ProfiledContext,
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
        ctx: &ProfiledContext,
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

    /// `norm`: (qk_norm, eps).
    fn build(
        ctx: &ProfiledContext,
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
            AttentionVariant::Workgroup => Design::Workgroup(workgroup_kernel(
                ctx, shape, qk_norm, wo, &constants, &wo_slots,
            )),
            AttentionVariant::Group => {
                let group = AttentionGroup::new(ctx, shape, (qk_norm, eps), split_len, wo)?;
                Design::Group(group)
            }
            AttentionVariant::Lanes => {
                let fold = (wo, ctx.profile.subgroup_size);
                let lanes = AttentionLanes::new(ctx, shape, (qk_norm, eps), split_len, fold)?;
                Design::Lanes(Box::new(lanes))
            }
        };
        // A part per head; with W_o folded into the lanes design per workgroup of its
        // heads, into the group design per GQA group. The group design combines its
        // splits itself (`GroupDispatch::merge`), the lanes design where W_o folds in
        // (`LanesDispatch::merge`).
        let part_heads = match (&design, folded) {
            (Design::Lanes(_), true) => AttentionLanes::part_heads(shape),
            (Design::Group(_), true) => shape.n_heads / shape.n_kv_heads,
            _ => 1,
        };
        let own_combine = match design {
            Design::Group(_) => true,
            Design::Lanes(_) => folded,
            Design::Workgroup(_) => false,
        };
        let combine = (!own_combine)
            .then(|| combine_kernel(ctx, shape, split_len, wo, &wo_constants, &wo_slots));
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

    /// Splits for the step at position `pos` (the group design lengthens its splits past
    /// [`crate::gpu::kernels::attention_group::MAX_SPLITS`], or unfolded
    /// [`crate::gpu::kernels::attention_group::MAX_SPLITS_UNFOLDED`]).
    pub fn splits_at(&self, pos: usize) -> u32 {
        let split_len = match &self.design {
            Design::Group(g) => g.split_len_at(pos + 1),
            _ => self.split_len,
        };
        (pos / split_len + 1) as u32
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
                    combine: d.merge,
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
