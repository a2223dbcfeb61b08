//! Decode attention for GPUs (shaders/attention_group.wgsl): one workgroup per (KV head,
//! split) computing every q head of the KV head's GQA group, so each key and value is
//! loaded once for the group; the q/k-norm + RoPE + KV write fused in; scores, softmax and
//! the P·V reduction in workgroup memory. Several splits write the partial results that
//! shaders/attention_combine.wgsl merges. [`super::attention::Attention`] puts it together
//! with the combine; W_o is never folded into it.

use super::attention::AttentionInputs;
use super::rope_kv::{rope_inputs_wgsl, HeadShape, ROPE_COMMON_WGSL, ROPE_VEC4_WGSL};
use super::{Binding, Dispatch, KernelPipeline, Slot, KV_VEC4_WGSL, STEP_WGSL};
use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;

const WGSL: &str = include_str!("../../../shaders/attention_group.wgsl");

/// Workgroup memory the kernel may use: WebGPU's default limit.
const WORKGROUP_BYTES: usize = 16 * 1024;

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
    /// (then the P·V reduction's accumulators), the reduction lanes and per-head
    /// statistics.
    pub fn workgroup_bytes(&self) -> usize {
        let g = self.group;
        16 * g * self.hd4 + 4 * g * self.chunk + 4 * self.width + 12 * g
    }

    /// The layout's consts, as the shader reads them.
    fn wgsl(&self) -> String {
        format!(
            "const GROUP: u32 = {}u;\nconst HD4: u32 = {}u;\nconst WIDTH: u32 = {}u;\n\
             const CHUNK: u32 = {}u;\n",
            self.group, self.hd4, self.width, self.chunk
        )
    }
}

pub struct AttentionGroup {
    kernel: KernelPipeline,
    pub layout: GroupLayout,
    pub shape: HeadShape,
}

impl AttentionGroup {
    /// The kernel for `shape` (`qk_norm`: the per-head RMSNorm with `eps`), `split_len`
    /// positions per split; an error where [`GroupLayout::of`] has no layout.
    pub fn new(
        ctx: &GpuContext,
        shape: HeadShape,
        (qk_norm, eps): (bool, f32),
        split_len: usize,
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
        let mut constants = shape.constants();
        constants.push(("QK_NORM", if qk_norm { 1.0 } else { 0.0 }));
        constants.push(("EPS", f64::from(eps)));
        constants.push(("SPLIT_LEN", split_len as f64));
        let source = [
            STEP_WGSL,
            ROPE_COMMON_WGSL,
            KV_VEC4_WGSL,
            &rope_inputs_wgsl(false, qk_norm, shape.head_dim),
            ROPE_VEC4_WGSL,
            &layout.wgsl(),
            WGSL,
        ]
        .concat();
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::Read; 4]);
        slots.extend([Slot::ReadWrite; 3]);
        let kernel = KernelPipeline::new(ctx, "attention/group", &source, &slots, &constants);
        Ok(AttentionGroup {
            kernel,
            layout,
            shape,
        })
    }

    /// The attention into `dst`: the output (one split) or the partial results (several);
    /// this step's k and v are written to `inputs.cache` at the step's position. Encode with
    /// [`Self::grid`]'s grid.
    pub fn dispatch(
        &self,
        ctx: &GpuContext,
        inputs: &AttentionInputs<'_>,
        dst: &wgpu::Buffer,
    ) -> Dispatch {
        let i = inputs;
        let buffers = [
            i.step, i.qkv, i.q_norm, i.k_norm, i.inv_freq, i.cache.k, i.cache.v, dst,
        ];
        let bindings = buffers.map(Binding::Buffer);
        let mut d = self.kernel.dispatch_bindings(ctx, &bindings, 1);
        d.grid = Self::grid(self.shape, 1);
        d
    }

    /// The grid for `splits` splits of `shape`: KV heads along x, splits along y.
    pub fn grid(shape: HeadShape, splits: u32) -> [u32; 3] {
        [shape.n_kv_heads as u32, splits, 1]
    }
}
