//! Decode attention for CPU adapters (shaders/soft/attention_lanes.wgsl), with the q/k-norm +
//! RoPE + KV write fused in, in two mappings of work to SIMD lanes:
//! - one split (the history fits `split_len`): one lane per q head, the GQA group's heads
//!   side by side (shaders/soft/attention_lanes_heads.wgsl);
//! - several splits: one lane per (split, KV head) computing the whole group, each key
//!   read once for all its q heads (shaders/soft/attention_lanes_splits.wgsl), then
//!   the combine merges the partial results.
//!
//! Optionally with the output projection W_o folded in (adapters with 8-wide subgroups:
//! lavapipe): the heads mapping's lanes project their head's output, summed over the
//! workgroup's heads through the subgroup into one part per workgroup
//! (shaders/soft/attention_lanes_wo.wgsl); after several splits its own combine, in the heads
//! mapping, merges them and projects the same way (shaders/soft/attention_lanes_combine.wgsl).
//! W_o's codes come through `code4`, from the texture copy the decode GEMVs read where
//! there is one.
//!
//! `gpu::forward::designs::Attention` puts them together (and, unfolded, the combine:
//! shaders/attention_combine.wgsl, `kernels::attention::combine_kernel`).

use super::lanes_state::{
    state_merge_wgsl, state_partial_wgsl, state_project_wgsl, state_wgsl, Queries,
    LANES_COMMON_WGSL,
};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::common::attention::{wo_codes_wgsl, AttentionInputs, WoFold};
use crate::gpu::kernels::common::rope_kv::{
    rope_inputs_wgsl, HeadShape, ROPE_COMMON_WGSL, ROPE_VEC4_WGSL,
};
use crate::gpu::kernels::common::wgsl::{KV_VEC4_WGSL, Q4_UNPACK_WGSL, STEP_WGSL};
use crate::gpu::kernels::{Binding, Dispatch, KernelPipeline, Slot};

const WGSL: &str = include_str!("../../../../shaders/soft/attention_lanes.wgsl");
const HEADS_WGSL: &str = include_str!("../../../../shaders/soft/attention_lanes_heads.wgsl");
const SPLITS_WGSL: &str = include_str!("../../../../shaders/soft/attention_lanes_splits.wgsl");
const WO_WGSL: &str = include_str!("../../../../shaders/soft/attention_lanes_wo.wgsl");
const MERGE_WGSL: &str = include_str!("../../../../shaders/soft/attention_lanes_combine.wgsl");

/// Lanes per workgroup (one SIMD batch on CPU adapters).
const LANES: u32 = 8;

pub struct AttentionLanes {
    /// One split: a lane per q head.
    by_head: KernelPipeline,
    /// Several splits: a lane per (split, KV head).
    by_split: KernelPipeline,
    /// With W_o folded in: the combine after several splits, in the heads mapping.
    merge: Option<KernelPipeline>,
    pub shape: HeadShape,
    pub split_len: usize,
}

/// The attention of one layer: `single` for a history of one split, `split` for more
/// (the combine follows it).
pub struct LanesDispatch {
    pub single: Dispatch,
    pub split: Dispatch,
    /// With W_o folded in, the combine after `split` (else attention_combine.wgsl's).
    pub merge: Option<Dispatch>,
}

impl AttentionLanes {
    /// `qk_norm`: apply the per-head RMSNorm (weights bound at dispatch) with `eps`;
    /// `wo`: fold in that output projection (the caller checks the shape:
    /// [`WoFold::can_fold`]), where the kernels use subgroups of `subgroup_size` (the
    /// profile's; the fold needs 8). Needs head_dim % 4 == 0
    /// and `split_len` in 1..=65,535 (mesa's loop limiter).
    pub fn new(
        ctx: &GpuContext,
        shape: HeadShape,
        (qk_norm, eps): (bool, f32),
        split_len: usize,
        (wo, subgroup_size): (Option<WoFold>, Option<u32>),
    ) -> Result<AttentionLanes> {
        shape.check()?;
        if wo.is_some() && subgroup_size != Some(LANES) {
            return Err(Error::InvalidArgument(format!(
                "lanes attention with W_o folded in: needs subgroups of {LANES} (the \
                 workgroup's heads sum their projections through the subgroup), the \
                 profile uses {subgroup_size:?}"
            )));
        }
        if !shape.head_dim.is_multiple_of(4) || !(1..=65_535).contains(&split_len) {
            return Err(Error::InvalidArgument(format!(
                "lanes attention: head_dim {} must be a multiple of 4 and the split length \
                 {split_len} within 1..=65535",
                shape.head_dim
            )));
        }
        let mut constants = shape.constants();
        constants.push(("SPLIT_LEN", split_len as f64));
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        let fold = wo.is_some();
        constants.extend(wo.map(|w| ("HIDDEN", w.rows as f64)));
        // Folded: q/k norm and inv_freq as uniforms, W_o's codes, qparams and the parts
        // as 3 more bindings (8 storage bindings in all at most, the default limit).
        let small = if fold { Slot::Uniform } else { Slot::Read };
        let mut slots = vec![Slot::Uniform, Slot::Read, small, small, small];
        slots.extend([Slot::ReadWrite; 4]);
        if let Some(w) = wo {
            slots.extend([w.codes.slot(), Slot::Read, Slot::ReadWrite]);
        }
        let (group, n) = (shape.n_heads / shape.n_kv_heads, shape.head_dim / 4);
        let inputs = rope_inputs_wgsl(fold, qk_norm, shape.head_dim);
        let wo_wgsl = match wo {
            Some(w) => [&wo_codes_wgsl(w.codes, 9), Q4_UNPACK_WGSL, WO_WGSL].concat(),
            None => String::new(),
        };
        // `state`: the State of as many q heads as one lane holds (and its functions);
        // `main`: the mapping.
        let kernel = |label: &'static str, state: &[&str], main: &str| {
            let common = [
                STEP_WGSL,
                ROPE_COMMON_WGSL,
                KV_VEC4_WGSL,
                LANES_COMMON_WGSL,
                &inputs,
                WGSL,
                ROPE_VEC4_WGSL,
                &wo_wgsl,
            ];
            let source = [&common[..], state, &[main]].concat().concat();
            KernelPipeline::new(ctx, label, &source, &slots, &constants)
        };
        let one_head = state_wgsl(1, n, Queries::FromQkv);
        let project = state_project_wgsl(n, fold);
        let whole_group = state_wgsl(group, n, Queries::FromQkv);
        Ok(AttentionLanes {
            // One split: no partial results to store.
            by_head: kernel(
                if fold {
                    "attention_lanes/heads+wo"
                } else {
                    "attention_lanes/heads"
                },
                &[&one_head, &project],
                HEADS_WGSL,
            ),
            by_split: kernel(
                "attention_lanes/splits",
                &[&whole_group, &state_partial_wgsl(group, n)],
                SPLITS_WGSL,
            ),
            merge: fold.then(|| {
                let state = [&one_head[..], &project, &state_merge_wgsl(n)];
                kernel("attention_lanes_combine+wo", &state, MERGE_WGSL)
            }),
            shape,
            split_len,
        })
    }

    /// `inputs`' QKV output, norm weights, inv_freq and caches (this step's k and v are
    /// written at `step.pos`; earlier positions hold the history); `out`: n_heads ·
    /// head_dim f32 (one split); `partials`: the split results (see
    /// [`crate::gpu::kernels::common::attention::partials_bytes`]); `wo`: the folded projection's bindings
    /// (none unfolded). Encode with [`Self::grid`]'s grid.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        inputs: &AttentionInputs<'_>,
        out: &wgpu::Buffer,
        partials: &wgpu::Buffer,
        wo: &[Binding],
    ) -> LanesDispatch {
        let i = inputs;
        let buffers = [
            i.step, i.qkv, i.q_norm, i.k_norm, i.inv_freq, i.cache.k, i.cache.v, out, partials,
        ];
        let mut b: Vec<Binding> = buffers.map(Binding::Buffer).to_vec();
        b.extend(wo.iter().cloned());
        let mut single = self.by_head.dispatch_bindings(ctx, &b, 1);
        single.grid = Self::grid(self.shape, 1);
        let split = self.by_split.dispatch_bindings(ctx, &b, 1);
        let merge = self.merge.as_ref().map(|k| {
            let mut d = k.dispatch_bindings(ctx, &b, 1);
            d.grid = single.grid;
            d
        });
        LanesDispatch {
            single,
            split,
            merge,
        }
    }

    /// Consecutive q heads of a GQA group per workgroup of the heads mapping: the heads
    /// whose projections one part sums, when W_o is folded in.
    pub fn part_heads(shape: HeadShape) -> usize {
        (shape.n_heads / shape.n_kv_heads).min(LANES as usize)
    }

    /// The grid for `splits` splits of `shape`. One: along y, per KV head the workgroups
    /// of 8 of its group's q heads. Several: workgroups of 8 splits along x, KV heads
    /// along y.
    pub fn grid(shape: HeadShape, splits: u32) -> [u32; 3] {
        let group = (shape.n_heads / shape.n_kv_heads) as u32;
        match splits {
            1 => [1, shape.n_kv_heads as u32 * group.div_ceil(LANES), 1],
            _ => [splits.div_ceil(LANES), shape.n_kv_heads as u32, 1],
        }
    }
}
