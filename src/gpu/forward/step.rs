//! The decode step's parts: the kernels of one model (one pipeline per shape, shared by
//! the layers), the options that shape the step, and the entries of the recorded step
//! (`record.rs` records it).

use crate::config::ModelConfig;
use crate::error::Result;
use crate::gpu::code_texture::{self, ModelCodeTextures};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::argmax::Argmax;
use crate::gpu::kernels::argmax_partials::ArgmaxPartials;
use crate::gpu::kernels::attention::{
    dispatches_at, Attention, AttentionDispatch, AttentionVariant, DispatchesAt, WoFold,
};
use crate::gpu::kernels::embed_q4::EmbedQ4;
use crate::gpu::kernels::gemv_q4::{Codes, CodesRead, Epilogue, GemvQ4, GemvSpec};
use crate::gpu::kernels::rope_kv::HeadShape;
use crate::gpu::kernels::Dispatch;
use crate::gpu::kv_cache::KvCache;
use crate::gpu::weights::{ModelWeights, Q4Buffers};

/// What one entry of the decode step computes (benchmarks sum their GPU time per kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKernel {
    Embed,
    /// Norm + QKV GEMV.
    Qkv,
    /// q/k-norm + RoPE + KV write + attention (+ the folded output projection).
    Attention,
    /// The output projection GEMV + residual (when not folded).
    Output,
    /// (Residual + parts →) norm + gate/up GEMV + SwiGLU.
    GateUp,
    /// Down GEMV + residual.
    Down,
    /// Final norm + head GEMV.
    Head,
    Argmax,
}

impl StepKernel {
    pub fn name(self) -> &'static str {
        match self {
            StepKernel::Embed => "embed",
            StepKernel::Qkv => "qkv",
            StepKernel::Attention => "attention",
            StepKernel::Output => "o",
            StepKernel::GateUp => "gate_up",
            StepKernel::Down => "down",
            StepKernel::Head => "head",
            StepKernel::Argmax => "argmax",
        }
    }
}

/// One entry of the recorded decode step.
pub(super) struct StepDispatch {
    pub(super) kernel: StepKernel,
    pub(super) work: StepWork,
}

pub(super) enum StepWork {
    Fixed(Dispatch),
    /// Attention: one dispatch, or split + combine at long histories.
    Attention(AttentionDispatch),
}

impl StepDispatch {
    /// The dispatches at position `pos` with their grids (attention's follow it).
    pub(super) fn at(&self, attention: &Attention, pos: usize) -> DispatchesAt<'_> {
        match &self.work {
            StepWork::Fixed(d) => dispatches_at([Some((d, d.grid)), None]),
            StepWork::Attention(a) => a.at(attention, pos),
        }
    }

    /// Encode at position `pos`.
    pub(super) fn encode(&self, attention: &Attention, pos: usize, pass: &mut wgpu::ComputePass) {
        for (d, grid) in self.at(attention, pos) {
            d.encode_grid(pass, grid);
        }
    }
}

/// The kernels of one model (one pipeline per distinct shape, shared by all layers).
/// RMSNorms are fused into the GEMVs that read the normed vector (QKV, gate/up, head).
/// The output projection is folded into attention where the profile folds the head shape
/// ([`crate::gpu::DeviceProfile::folds`]; the gate/up GEMV then adds the attention's parts
/// to the residual), else it is a GEMV of its own.
pub(super) struct Kernels {
    pub(super) embed: EmbedQ4,
    pub(super) qkv: GemvQ4,
    pub(super) attention: Attention,
    pub(super) attn_output: Option<GemvQ4>,
    pub(super) gate_up: GemvQ4,
    pub(super) down: GemvQ4,
    pub(super) head: GemvQ4,
    /// The argmax over the logits: the step's on CPU adapters, and on GPUs the selection's
    /// after logit adjustments or a mask uploaded after the head ran (forward/select.rs).
    pub(super) argmax: Argmax,
    /// The step's argmax on GPUs: the head GEMV's per-workgroup bests, reduced
    /// ([`Epilogue::StoreArgmax`]; `None`: the head only stores the logits).
    pub(super) argmax_partials: Option<ArgmaxPartials>,
}

impl Kernels {
    pub(super) fn new(
        ctx: &GpuContext,
        cfg: &ModelConfig,
        context: usize,
        options: StepOptions,
    ) -> Result<Kernels> {
        let designs = ctx.profile.gemv;
        let (h, f, v) = (cfg.hidden_size, cfg.ffn_size, cfg.vocab_size);
        let gemv_adding = |variant, n, k, epilogue, bias, norm: bool, add_parts| {
            let spec = GemvSpec {
                n,
                k,
                epilogue,
                bias,
                norm_eps: norm.then_some(cfg.rms_eps),
                add_parts,
            };
            GemvQ4::new(ctx, variant, spec)
        };
        let gemv = |variant, n, k, epilogue, bias, norm| {
            gemv_adding(variant, n, k, epilogue, bias, norm, 0)
        };
        let qkv_rows = cfg.q_dim() + 2 * cfg.kv_dim();
        let shape = KvCache::shape(cfg, context);
        let split_len = ctx.profile.split_len;
        let fold = options.folds_output(ctx, shape);
        let (attention, attn_output) = if fold {
            // The lanes design reads W_o's codes where the decode GEMVs would (their
            // texture copy on CPU adapters), the group and workgroup designs its storage
            // buffer.
            let design = ctx.profile.attention_for(shape, true);
            let codes = match (design, ctx.profile.code_textures) {
                (AttentionVariant::Lanes, Some(order)) => {
                    code_texture::read(order, h, cfg.q_dim(), 1)
                }
                _ => CodesRead::Buffer,
            };
            let blocks = ctx.profile.wo_blocks;
            let wo = WoFold {
                rows: h,
                codes,
                blocks,
            };
            let (norm, eps) = (cfg.qk_norm, cfg.rms_eps);
            let a =
                Attention::with_output_projection(ctx, design, shape, norm, eps, split_len, wo)?;
            (a, None)
        } else {
            let a = Attention::new(ctx, shape, cfg.qk_norm, cfg.rms_eps, split_len)?;
            let o = gemv(designs.o, h, cfg.q_dim(), Epilogue::AddInto, false, false)?;
            (a, Some(o))
        };
        let add_parts = if fold { attention.parts() } else { 0 };
        let head_epilogue = match designs.head.fused_argmax_rows() {
            Some(_) => Epilogue::StoreArgmax,
            None => Epilogue::Store,
        };
        let head = gemv(designs.head, v, h, head_epilogue, false, true)?;
        let argmax_partials = (head_epilogue == Epilogue::StoreArgmax)
            .then(|| ArgmaxPartials::new(ctx, head.workgroups()));
        Ok(Kernels {
            embed: EmbedQ4::new(ctx, v, h)?,
            qkv: gemv(
                designs.qkv,
                qkv_rows,
                h,
                Epilogue::Store,
                cfg.qkv_bias,
                true,
            )?,
            attention,
            attn_output,
            gate_up: gemv_adding(
                designs.gate_up,
                f,
                h,
                Epilogue::SwiGlu,
                false,
                true,
                add_parts,
            )?,
            down: gemv(designs.down, h, f, Epilogue::AddInto, false, false)?,
            head,
            argmax: Argmax::new(ctx, v),
            argmax_partials,
        })
    }
}

/// How the decode step is built; the defaults are the device profile's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepOptions {
    /// Fold the attention output projection into attention (4 dispatches per layer
    /// instead of 5). `None`: as the profile says ([`crate::gpu::DeviceProfile`]'s
    /// `fold_output`). Shapes the profile cannot fold never do
    /// ([`crate::gpu::DeviceProfile::folds`]).
    pub fold_output: Option<bool>,
}

impl StepOptions {
    fn folds_output(self, ctx: &GpuContext, shape: HeadShape) -> bool {
        ctx.profile.folds(shape) && self.fold_output.unwrap_or(ctx.profile.fold_output)
    }
}

/// Dispatches outside the layers: embed, then norm + head, and argmax.
pub(super) const DISPATCHES_OUTSIDE_LAYERS: usize = 3;

/// The decode GEMVs' matrices: the weights, and their codes as textures where the GEMV
/// variant reads them so.
pub(super) struct StepMatrices<'a> {
    pub(super) weights: &'a ModelWeights,
    pub(super) textures: Option<&'a ModelCodeTextures>,
}

impl<'a> StepMatrices<'a> {
    /// Matrix `m` with its codes: the texture of layer `i`'s matrix `j` (0 QKV, 1 output,
    /// 2 gate/up, 3 down; `None`: the head) when there are textures, else its buffer.
    pub(super) fn codes(
        &self,
        m: &'a Q4Buffers,
        at: Option<(usize, usize)>,
    ) -> (&'a Q4Buffers, Codes<'a>) {
        let codes = match (self.textures, at) {
            (Some(t), Some((i, j))) => Codes::Texture(&t.layers[i][j].view),
            (Some(t), None) => Codes::Texture(&t.head.view),
            (None, _) => Codes::Buffer(&m.codes),
        };
        (m, codes)
    }
}
