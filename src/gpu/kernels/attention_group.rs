//! Decode attention for GPUs (shaders/attention_group.wgsl): one workgroup per (KV head,
//! split) computing every q head of the KV head's GQA group, so each key and value is
//! loaded once for the group; the q/k-norm + RoPE + KV write fused in; scores, softmax and
//! the P·V reduction in workgroup memory. Several splits write the partial results that
//! the design's merge (shaders/attention_group_merge.wgsl) combines, one workgroup per q
//! head with its lanes over the splits.
//!
//! Optionally with the output projection W_o folded in (shaders/attention_group_wo.wgsl),
//! one part per KV head: each KV head's projection is cut into blocks of W_o rows
//! ([`WoBlocks`]), one workgroup per (KV head, block). Within one split each of them
//! computes its group's attention (K and V read once per block, from cache at short
//! histories) and then its block; only block 0 writes this step's k and v to the caches
//! (the others attend to the same values, held in workgroup memory). Past one split the
//! splits write partial results as unfolded and the design's own combine
//! (shaders/attention_group_combine.wgsl), also one workgroup per (KV head, block),
//! merges them and projects: the same dispatches as unfolded, W_o spread over as many
//! workgroups as the O GEMV it replaces. As every such workgroup merges every split, the
//! splits are capped at [`MAX_SPLITS`] (longer splits past that); unfolded, at
//! [`MAX_SPLITS_UNFOLDED`], so that short splits (which fill a large GPU at short
//! histories) never leave the combine thousands to merge at long ones.

use super::attention::wo_bindings_wgsl;
use super::common::attention::WoBlocks;
use super::common::attention::{AttentionInputs, WoFold};
use super::common::rope_kv::{rope_inputs_wgsl, HeadShape, ROPE_COMMON_WGSL, ROPE_VEC4_WGSL};
use super::common::wgsl::{KV_VEC4_WGSL, STEP_WGSL};
use super::{Binding, Dispatch, KernelPipeline, Slot};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention_group.wgsl");
const WO_WGSL: &str = include_str!("../../../shaders/attention_group_wo.wgsl");
const COMBINE_WGSL: &str = include_str!("../../../shaders/attention_group_combine.wgsl");
const MERGE_WGSL: &str = include_str!("../../../shaders/attention_group_merge.wgsl");

/// Invocations of the merge without W_o folded in: lanes over the splits (at least
/// [`MAX_SPLITS_UNFOLDED`], so each lane takes one) and over head_dim.
const MERGE_WIDTH: usize = 256;
const _: () = assert!(MAX_SPLITS_UNFOLDED <= MERGE_WIDTH);

/// Workgroup memory the kernel may use: WebGPU's default limit.
const WORKGROUP_BYTES: usize = 16 * 1024;

/// With W_o folded in, the most splits a step has: past `split_len` × `MAX_SPLITS`
/// positions the split length grows (⌈len / MAX_SPLITS⌉) instead of the split count, so
/// that the combine, which every (KV head, block) workgroup runs over all the splits,
/// merges at most this many (issue 41, part 3: 128 at 32K with 256-position splits).
pub const MAX_SPLITS: usize = 32;

/// Without W_o folded in, the most splits a step has (the split length grows past
/// that): 128, as many as 256-position splits make at 32K.
pub const MAX_SPLITS_UNFOLDED: usize = 128;

/// Workgroup widths tried, widest first.
const WIDTHS: [usize; 3] = [256, 128, 64];

/// How the kernel is laid out for one head shape (its WGSL consts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLayout {
    /// q heads per KV head: the heads one workgroup computes.
    pub group: usize,
    /// head_dim / 4: vec4s per head.
    pub hd4: usize,
    /// Invocations per workgroup.
    pub width: usize,
    /// Positions per chunk of a split (scores in workgroup memory): 2 · width.
    pub chunk: usize,
}

impl GroupLayout {
    /// The widest layout of `shape` within [`WORKGROUP_BYTES`]; `None` where the design
    /// cannot run it: head_dim not a multiple of 4, or a group too large for workgroup
    /// memory (or for a segment of lanes per head).
    pub fn of(shape: HeadShape) -> Option<GroupLayout> {
        let hd = shape.head_dim;
        if shape.check().is_err() || !hd.is_multiple_of(4) {
            return None;
        }
        let group = shape.n_heads / shape.n_kv_heads;
        WIDTHS
            .iter()
            .map(|&width| GroupLayout {
                group,
                hd4: hd / 4,
                width,
                chunk: 2 * width,
            })
            .find(|l| {
                l.group < l.width && l.hd4 <= l.width && l.workgroup_bytes() <= WORKGROUP_BYTES
            })
    }

    /// Bytes of workgroup memory: the group's roped queries, a chunk's scores per head
    /// (then the P·V reduction's accumulators), the reduction lanes, per-head statistics
    /// and this step's f16-packed k and v row.
    pub fn workgroup_bytes(&self) -> usize {
        let g = self.group;
        16 * g * self.hd4 + 4 * g * self.chunk + 4 * self.width + 12 * g + 16 * self.hd4
    }

    /// The layout's consts, as the shader reads them.
    fn wgsl(&self) -> String {
        format!(
            "const GROUP: u32 = {}u;\nconst GROUP_P2: u32 = {}u;\nconst HD4: u32 = {}u;\n\
             const WIDTH: u32 = {}u;\nconst CHUNK: u32 = {}u;\n",
            self.group,
            self.group.next_power_of_two(),
            self.hd4,
            self.width,
            self.chunk
        )
    }
}

/// The shader's per-head registers and the functions that use them, written out for a
/// group of `group` heads: `Acc` (head g's P·V accumulator in member `h{g}`),
/// `group_scores` (a position's score for every head, each a scalar of its own),
/// `group_rescale`, `group_add4`, `group_add1` (P·V), `group_store`, `group_load_add`
/// (the ranges' halving through p_sh: head g's vec4 at `at + 4 g`) and `group_head`. On
/// an H200 the loops over an array indexed by head that these replace kept it in memory
/// (a score over one key cost 8 µs per layer; shaders/attention_group.wgsl).
fn group_registers_wgsl(group: usize) -> String {
    let each = |f: &dyn Fn(usize) -> String| (0..group).map(f).collect::<String>();
    let members = each(&|g| format!("    h{g}: vec4<f32>,\n"));
    let scores_init = each(&|g| format!("    var s{g} = 0.0;\n"));
    let scores_dot = each(&|g| format!("        s{g} += dot(q_sh[{g}u * HD4 + e], k);\n"));
    let scores_out = each(&|g| format!("    p_sh[{g}u * CHUNK + t] = s{g} * scale;\n"));
    let rescale = each(&|g| format!("    (*acc).h{g} *= corr_sh[{g}u];\n"));
    // Head g's term for position t + k · RANGES, value vk.
    let term = |g: usize, k: usize| format!("p_sh[{g}u * CHUNK + t + {k}u * RANGES] * v{k}");
    let add4 = each(&|g| {
        let terms: Vec<String> = (0..4).map(|k| term(g, k)).collect();
        format!("    (*acc).h{g} += {};\n", terms.join(" + "))
    });
    let add1 = each(&|g| format!("    (*acc).h{g} += p_sh[{g}u * CHUNK + t] * v;\n"));
    // Head g's vec4 in p_sh at at + 4 g: its components in turn.
    let lanes = |g: usize, f: &dyn Fn(usize, char) -> String| -> Vec<String> {
        "xyzw"
            .chars()
            .enumerate()
            .map(|(c, x)| f(4 * g + c, x))
            .collect()
    };
    let store = each(&|g| {
        lanes(g, &|o, x| {
            format!("    p_sh[at + {o}u] = (*acc).h{g}.{x};\n")
        })
        .concat()
    });
    let load_add = each(&|g| {
        let loads = lanes(g, &|o, _| format!("p_sh[at + {o}u]"));
        format!("    (*acc).h{g} += vec4<f32>({});\n", loads.join(", "))
    });
    let head = each(&|g| format!("        case {g}u: {{ return (*acc).h{g}; }}\n"));
    format!(
        "struct Acc {{\n{members}}}\n\
         fn group_scores(row: u32, now: bool, t: u32, scale: f32) {{\n{scores_init}    \
         for (var e = 0u; e < HD4; e++) {{\n        \
         let k = f16x4(cache_or_row(true, row + e, e, now));\n{scores_dot}    }}\n{scores_out}}}\n\
         fn group_rescale(acc: ptr<function, Acc>) {{\n{rescale}}}\n\
         fn group_add4(acc: ptr<function, Acc>, t: u32, v0: vec4<f32>, v1: vec4<f32>, \
         v2: vec4<f32>, v3: vec4<f32>) {{\n{add4}}}\n\
         fn group_add1(acc: ptr<function, Acc>, t: u32, v: vec4<f32>) {{\n{add1}}}\n\
         fn group_store(acc: ptr<function, Acc>, at: u32) {{\n{store}}}\n\
         fn group_load_add(acc: ptr<function, Acc>, at: u32) {{\n{load_add}}}\n\
         fn group_head(acc: ptr<function, Acc>, g: u32) -> vec4<f32> {{\n    switch g {{\n{head}        \
         default: {{ return vec4<f32>(0.0); }}\n    }}\n}}\n"
    )
}

/// The group design's checks and WGSL of its W_o blocks (the blocks: `common::attention`).
impl WoBlocks {
    /// Rows positive, lanes a power of two dividing the layout's workgroup.
    fn check(self, layout: &GroupLayout) -> Result<()> {
        let lanes = self.lanes as usize;
        if self.rows == 0 || !lanes.is_power_of_two() || !layout.width.is_multiple_of(lanes) {
            return Err(Error::InvalidArgument(format!(
                "group attention W_o blocks {self:?}: rows must be positive and lanes a power \
                 of two dividing the workgroup's {} invocations",
                layout.width
            )));
        }
        Ok(())
    }

    fn wgsl(self) -> String {
        format!(
            "const WO_ROWS: u32 = {}u;\nconst WO_LANES: u32 = {}u;\n",
            self.rows, self.lanes
        )
    }
}

/// The shaders' `split_len_at(len)`: positions per split for a history of `len`, longer
/// than `SPLIT_LEN` (the pipeline's override) past `cap` splits
/// ([`AttentionGroup::split_len_at`]).
fn split_len_wgsl(cap: usize) -> String {
    format!(
        "fn split_len_at(len: u32) -> u32 {{
    return max(SPLIT_LEN, (len + {}u) / {cap}u);
}}
",
        cap - 1
    )
}

/// The most splits a step has, W_o `folded` in or not.
fn max_splits(folded: bool) -> usize {
    if folded {
        MAX_SPLITS
    } else {
        MAX_SPLITS_UNFOLDED
    }
}

pub struct AttentionGroup {
    kernel: KernelPipeline,
    /// The combine after several splits: with W_o folded in, one workgroup per (KV head,
    /// block), which also projects; else one per q head.
    merge: KernelPipeline,
    pub layout: GroupLayout,
    pub shape: HeadShape,
    /// The folded W_o, when folded.
    wo: Option<WoFold>,
    /// Positions per split (below [`Self::max_splits`] splits).
    split_len: usize,
}

/// The attention of one layer in the group design: `single` for a history of one split,
/// `split` then `merge` for more.
pub struct GroupDispatch {
    pub single: Dispatch,
    pub split: Dispatch,
    pub merge: Dispatch,
}

impl AttentionGroup {
    /// The kernel for `shape` (`qk_norm`: the per-head RMSNorm with `eps`), `split_len`
    /// positions per split, with `wo` folded in (the caller checks the shape:
    /// [`WoFold::can_fold`]); an error where
    /// [`GroupLayout::of`] has no layout or `wo`'s blocks do not fit it.
    pub fn new(
        ctx: &GpuContext,
        shape: HeadShape,
        (qk_norm, eps): (bool, f32),
        split_len: usize,
        wo: Option<WoFold>,
    ) -> Result<AttentionGroup> {
        shape.check()?;
        let layout = GroupLayout::of(shape).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "group attention: head_dim {} must be a multiple of 4 and a GQA group of {} \
                 heads fit {WORKGROUP_BYTES} bytes of workgroup memory",
                shape.head_dim,
                shape.n_heads / shape.n_kv_heads
            ))
        })?;
        if let Some(w) = wo {
            w.blocks.check(&layout)?;
        }
        let mut constants = shape.constants();
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        constants.push(("SPLIT_LEN", split_len as f64));
        constants.extend(wo.map(|w| ("HIDDEN", w.rows as f64)));
        // Folded: q/k norm and inv_freq as uniforms, W_o's codes, qparams and the parts as
        // 3 more bindings (8 storage bindings at most).
        // The fold's source from binding `first` on, the group's outputs read from `o_sh`.
        let fold = |first, o_sh: &str| match wo {
            Some(w) => {
                let o4 = format!("fn fold_o4(i: u32) -> vec4<f32> {{\n    return {o_sh}[i];\n}}\n");
                [wo_bindings_wgsl(w, first), o4, w.blocks.wgsl()].concat() + WO_WGSL
            }
            None => "const WO_FOLD = false;\nfn project_block(kv: u32, block: u32, lid: u32) {}\n"
                .into(),
        };
        let folded = wo.is_some();
        let split_at = split_len_wgsl(max_splits(folded));
        let source = [
            STEP_WGSL,
            ROPE_COMMON_WGSL,
            KV_VEC4_WGSL,
            &rope_inputs_wgsl(folded, qk_norm, shape.head_dim),
            ROPE_VEC4_WGSL,
            &layout.wgsl(),
            &group_registers_wgsl(layout.group),
            &split_at,
            &fold(8, "q_sh"),
            WGSL,
        ]
        .concat();
        let small = if folded { Slot::Uniform } else { Slot::Read };
        let mut slots = vec![Slot::Uniform, Slot::Read, small, small, small];
        slots.extend([Slot::ReadWrite; 3]);
        let wo_slots: Vec<Slot> = wo.iter().flat_map(|w| w.slots()).collect();
        slots.extend(&wo_slots);
        let label = ["attention/group", if folded { "+wo" } else { "" }].concat();
        let kernel = KernelPipeline::new(ctx, &label, &source, &slots, &constants);
        let mut constants = vec![
            ("N_HEADS", shape.n_heads as f64),
            ("HD", shape.head_dim as f64),
            ("SPLIT_LEN", split_len as f64),
        ];
        constants.extend(wo.map(|w| ("HIDDEN", w.rows as f64)));
        let mut slots = vec![Slot::Uniform, Slot::Read, Slot::ReadWrite];
        slots.extend(&wo_slots);
        let (label, own, body) = match wo {
            Some(_) => (
                "attention_group_combine+wo",
                format!("const MAX_SPLITS: u32 = {MAX_SPLITS}u;\n") + &fold(3, "o_sh"),
                COMBINE_WGSL,
            ),
            None => (
                "attention_group_merge",
                format!("const MERGE_WIDTH: u32 = {MERGE_WIDTH}u;\n"),
                MERGE_WGSL,
            ),
        };
        let source = [STEP_WGSL, &layout.wgsl(), &split_at, &own, body].concat();
        let merge = KernelPipeline::new(ctx, label, &source, &slots, &constants);
        Ok(AttentionGroup {
            kernel,
            merge,
            layout,
            shape,
            wo,
            split_len,
        })
    }

    /// Positions per split for a history of `len` positions: `split_len`, longer where
    /// that would make more than [`MAX_SPLITS`] splits (W_o folded in) or
    /// [`MAX_SPLITS_UNFOLDED`] (as the shaders' `split_len_at`).
    pub fn split_len_at(&self, len: usize) -> usize {
        self.split_len
            .max(len.div_ceil(max_splits(self.wo.is_some())))
    }

    /// The attention into `out` (one split) or `partials` (several, then merged into `out`
    /// by `merge`), and with W_o folded in, `inputs.wo`'s parts; this step's k and v are
    /// written to `inputs.cache` at the step's position. The grids: `single` the whole of
    /// one split, `split` one split (the caller sets the count: [`Self::grid`]), `merge`
    /// (KV heads, blocks) folded, (q heads) unfolded.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        inputs: &AttentionInputs<'_>,
        partials: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> GroupDispatch {
        let i = inputs;
        let wo: Vec<Binding> = match (i.wo, self.wo) {
            (Some(p), Some(wo)) => p.bindings(wo).to_vec(),
            _ => vec![],
        };
        let attend = |dst| {
            let buffers = [
                i.step, i.qkv, i.q_norm, i.k_norm, i.inv_freq, i.cache.k, i.cache.v, dst,
            ];
            let mut b: Vec<Binding> = buffers.map(Binding::Buffer).to_vec();
            b.extend(wo.iter().cloned());
            self.kernel.dispatch_bindings(ctx, &b, 1)
        };
        let (kv, blocks) = (self.shape.n_kv_heads as u32, self.blocks());
        let mut single = attend(out);
        single.grid = [kv, 1, blocks];
        let mut split = attend(partials);
        split.grid = Self::grid(self.shape, 1);
        let mut b: Vec<Binding> = [i.step, partials, out].map(Binding::Buffer).to_vec();
        b.extend(wo.iter().cloned());
        let mut merge = self.merge.dispatch_bindings(ctx, &b, 1);
        merge.grid = match self.wo {
            Some(_) => [kv, blocks, 1],
            None => [self.shape.n_heads as u32, 1, 1],
        };
        GroupDispatch {
            single,
            split,
            merge,
        }
    }

    /// W_o row blocks per KV head (1 unfolded).
    pub fn blocks(&self) -> u32 {
        self.wo.map_or(1, |w| w.blocks.blocks(w.rows))
    }

    /// The grid for `splits` splits of `shape`: KV heads along x, splits along y.
    pub fn grid(shape: HeadShape, splits: u32) -> [u32; 3] {
        [shape.n_kv_heads as u32, splits, 1]
    }
}
