//! Decode attention's designs for GPUs, one query token (GQA, softmax), split along the
//! context into chunks of `split_len` positions when the history is longer than one
//! chunk (flash-decoding: the splits write partial results that a combine merges):
//! - one workgroup per (KV head, split) computing its whole GQA group
//!   (`attention_group`, which merges its splits itself): the GPUs' design;
//! - where the group design cannot run a shape: one workgroup per (q head, split), norm +
//!   RoPE + KV write fused in (shaders/attention.wgsl, `workgroup_kernel`); W_o folds in
//!   here as one part per q head (shaders/attention_wo.wgsl); its splits merged by
//!   shaders/attention_combine.wgsl (`combine_kernel`, also the CPU adapters' lanes
//!   design's where W_o is not folded in).
//!
//! The CPU adapters' design is `soft::attention_lanes`; `gpu::forward::designs::Attention`
//! puts the designs behind one wrapper (the inputs and W_o fold they share:
//! `common::attention`).

use super::common::attention::{wo_codes_wgsl, WoFold};
use super::common::rope_kv::{rope_inputs_wgsl, HeadShape, ROPE_COMMON_WGSL};
use super::common::wgsl::{Q4_UNPACK_WGSL, REDUCE64_WGSL, STEP_WGSL};
use super::{KernelPipeline, Slot};
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

/// The workgroup design's kernel for `shape` (`constants`: the shape's, norm's, split's
/// and W_o's overrides; `wo_slots`: the folded W_o's slots, none unfolded).
pub(crate) fn workgroup_kernel(
    ctx: &GpuContext,
    shape: HeadShape,
    qk_norm: bool,
    wo: Option<WoFold>,
    constants: &[(&str, f64)],
    wo_slots: &[Slot],
) -> KernelPipeline {
    let folded = wo.is_some();
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
    slots.extend(wo_slots);
    let label = if folded {
        "attention/workgroup+wo"
    } else {
        "attention/workgroup"
    };
    KernelPipeline::new(ctx, label, &source, &slots, constants)
}

/// The combine after several splits (shaders/attention_combine.wgsl), projecting through
/// the folded W_o when `wo` (`wo_constants`, `wo_slots`: its overrides and slots): the
/// workgroup design's, and the lanes design's where it does not combine itself.
pub(crate) fn combine_kernel(
    ctx: &GpuContext,
    shape: HeadShape,
    split_len: usize,
    wo: Option<WoFold>,
    wo_constants: &[(&str, f64)],
    wo_slots: &[Slot],
) -> KernelPipeline {
    let folded = wo.is_some();
    let mut constants = vec![
        ("N_HEADS", shape.n_heads as f64),
        ("HD", shape.head_dim as f64),
        ("SPLIT_LEN", split_len as f64),
    ];
    constants.extend(wo_constants);
    let mut slots = vec![Slot::Uniform, Slot::Read, Slot::ReadWrite];
    slots.extend(wo_slots);
    let source = [STEP_WGSL, &wo_source(wo, 3, shape.head_dim), COMBINE_WGSL].concat();
    let label = if folded {
        "attention_combine+wo"
    } else {
        "attention_combine"
    };
    KernelPipeline::new(ctx, label, &source, &slots, &constants)
}
