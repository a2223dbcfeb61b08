//! The decode step's parts: the kernels of one model (one pipeline per shape, shared by
//! the layers), the options that shape the step, and the entries of the recorded step
//! (`record.rs` records it).

use super::designs::{Attention, AttentionDispatch};
use crate::config::ModelConfig;
use crate::error::Result;
use crate::gpu::code_texture::{self, ModelCodeTextures};
use crate::gpu::kernels::argmax::Argmax;
use crate::gpu::kernels::argmax_partials::ArgmaxPartials;
use crate::gpu::kernels::common::attention::{
    dispatches_at, AttentionVariant, DispatchesAt, WoFold,
};
use crate::gpu::kernels::common::gemv::GemvQ4;
use crate::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, GemvVariant};
use crate::gpu::kernels::common::q4_codes::{Codes, CodesRead};
use crate::gpu::kernels::common::rope_kv::HeadShape;
use crate::gpu::kernels::embed_q4::{split_of, EmbedQ4};
use crate::gpu::kernels::{Dispatch, MatrixFormat};
use crate::gpu::kv_cache::KvCache;
use crate::gpu::profiled::ProfiledContext;
use crate::gpu::weights::{MatrixBuffers, ModelWeights};

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

/// The kernels of one matrix role: one per format its matrices come in (a Q4_K_M model's
/// `ffn_down` is Q8 in some layers, Q4 in the others).
pub(super) struct ByFormat<T> {
    q4: Option<T>,
    q8: Option<T>,
}

impl<T> ByFormat<T> {
    /// `build(format)` for each format of `matrices`.
    pub(super) fn new<'m>(
        matrices: impl Iterator<Item = &'m MatrixBuffers> + Clone,
        build: impl Fn(MatrixFormat) -> Result<T>,
    ) -> Result<ByFormat<T>> {
        let of = |f| {
            let any = matrices.clone().any(|m| m.format == f);
            any.then(|| build(f)).transpose()
        };
        Ok(ByFormat {
            q4: of(MatrixFormat::Q4)?,
            q8: of(MatrixFormat::Q8)?,
        })
    }

    /// The kernel for matrix `m`.
    pub(super) fn of(&self, m: &MatrixBuffers) -> &T {
        let k = match m.format {
            MatrixFormat::Q4 => &self.q4,
            MatrixFormat::Q8 => &self.q8,
        };
        k.as_ref()
            .expect("a kernel for every format of the role's matrices")
    }

    /// Every kernel.
    pub(super) fn all(&self) -> impl Iterator<Item = &T> {
        self.q4.iter().chain(&self.q8)
    }
}

/// A decode GEMV role: the profile's design for its Q4 matrices, its Q8 design
/// ([`crate::gpu::profile::Q8Designs`]) for Q8 ones.
pub(super) type RoleGemv = ByFormat<GemvQ4>;

impl RoleGemv {
    fn gemv<'m>(
        ctx: &ProfiledContext,
        design: GemvVariant,
        spec: GemvSpec,
        matrices: impl Iterator<Item = &'m MatrixBuffers> + Clone,
    ) -> Result<RoleGemv> {
        ByFormat::new(matrices, |format| {
            let variant = ctx.profile.gemv_in(design, format);
            GemvQ4::new(ctx, variant, GemvSpec { format, ..spec })
        })
    }
}

/// The kernels of one model (one pipeline per distinct shape and format, shared by all
/// layers). RMSNorms are fused into the GEMVs that read the normed vector (QKV, gate/up,
/// head). The output projection is folded into attention where the profile folds the
/// head shape ([`crate::gpu::DeviceProfile::folds`]) and every W_o is Q4 (the gate/up
/// GEMV then adds the attention's parts to the residual), else it is a GEMV of its own.
pub(super) struct Kernels {
    pub(super) embed: EmbedQ4,
    pub(super) qkv: RoleGemv,
    pub(super) attention: Attention,
    pub(super) attn_output: Option<RoleGemv>,
    pub(super) gate_up: RoleGemv,
    pub(super) down: RoleGemv,
    pub(super) head: HeadGemv,
    /// The argmax over the logits: the step's on CPU adapters, and on GPUs the selection's
    /// after logit adjustments or a mask uploaded after the head ran (forward/select.rs).
    pub(super) argmax: Argmax,
    /// The step's argmax on GPUs: the head GEMV's per-workgroup bests, reduced
    /// ([`Epilogue::StoreArgmax`]; `None`: the head only stores the logits).
    pub(super) argmax_partials: Option<ArgmaxPartials>,
}

impl Kernels {
    pub(super) fn new(
        ctx: &ProfiledContext,
        cfg: &ModelConfig,
        context: usize,
        weights: &ModelWeights,
        options: StepOptions,
    ) -> Result<Kernels> {
        let designs = ctx.profile.gemv;
        let (h, f, v) = (cfg.hidden_size, cfg.ffn_size, cfg.vocab_size);
        let spec = |n, k, epilogue, bias, norm: bool, add_parts| GemvSpec {
            n,
            k,
            epilogue,
            bias,
            norm_eps: norm.then_some(cfg.rms_eps),
            add_parts,
            format: MatrixFormat::Q4,
            row0: 0,
        };
        let role = |j: usize| weights.layers.iter().map(move |l| l.matrices()[j]);
        let qkv_rows = cfg.q_dim() + 2 * cfg.kv_dim();
        let shape = KvCache::shape(cfg, context);
        let split_len = ctx.profile.split_len;
        let wo_q4 = role(OUTPUT).all(|m| m.format == MatrixFormat::Q4);
        let fold = options.folds_output(ctx, shape) && wo_q4;
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
            let o_spec = spec(h, cfg.q_dim(), Epilogue::AddInto, false, false, 0);
            let o = RoleGemv::gemv(ctx, designs.o, o_spec, role(OUTPUT))?;
            (a, Some(o))
        };
        let add_parts = if fold { attention.parts() } else { 0 };
        // The head's design: the profile's for Q4, its Q8 design (the GPU rows, which
        // fuse the argmax) for Q8.
        let head_design = ctx.profile.gemv_in(designs.head, weights.head().format);
        let head_epilogue = match head_design.fused_argmax_rows() {
            Some(_) => Epilogue::StoreArgmax,
            None => Epilogue::Store,
        };
        let head_spec = GemvSpec {
            format: weights.head().format,
            ..spec(v, h, head_epilogue, false, true, 0)
        };
        let head = HeadGemv::new(ctx, head_design, head_spec, weights.head())?;
        let argmax_partials = (head_epilogue == Epilogue::StoreArgmax)
            .then(|| ArgmaxPartials::new(ctx, head.workgroups()));
        let split = split_of(&weights.embedding_parts(ctx)?)?;
        let qkv_spec = spec(qkv_rows, h, Epilogue::Store, cfg.qkv_bias, true, 0);
        let gate_up_spec = spec(f, h, Epilogue::SwiGlu, false, true, add_parts);
        let down_spec = spec(h, f, Epilogue::AddInto, false, false, 0);
        Ok(Kernels {
            embed: EmbedQ4::new(ctx, v, h, weights.token_embd.format, split)?,
            qkv: RoleGemv::gemv(ctx, designs.qkv, qkv_spec, role(QKV))?,
            attention,
            attn_output,
            gate_up: RoleGemv::gemv(ctx, designs.gate_up, gate_up_spec, role(GATE_UP))?,
            down: RoleGemv::gemv(ctx, designs.down, down_spec, role(DOWN))?,
            head,
            argmax: Argmax::new(ctx, v),
            argmax_partials,
        })
    }
}

/// The LM head GEMV: one kernel, or one per part of a head whose codes exceed a storage
/// binding (a Q8 head of a large vocabulary: [`MatrixBuffers::parts`]).
pub(super) struct HeadGemv {
    pub(super) parts: Vec<(GemvQ4, std::ops::Range<usize>)>,
}

impl HeadGemv {
    fn new(
        ctx: &ProfiledContext,
        design: GemvVariant,
        spec: GemvSpec,
        head: &MatrixBuffers,
    ) -> Result<HeadGemv> {
        let max_binding = ctx.limits.max_storage_buffer_binding_size;
        let parts = head.parts(max_binding)?;
        if parts.len() > 1 && !matches!(design, GemvVariant::GpuRows(_)) {
            return Err(crate::error::Error::ExceedsDeviceLimits {
                what: format!("the {} LM head's codes", head.format.name()),
                limit: "max_storage_buffer_binding_size",
                needed: head.format.code_bytes(head.rows, head.cols),
                available: max_binding,
            });
        }
        let parts = parts
            .into_iter()
            .map(|p| {
                let part = GemvSpec {
                    n: p.rows.len(),
                    row0: p.rows.start,
                    ..spec
                };
                Ok((GemvQ4::new(ctx, design, part)?, p.rows))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(HeadGemv { parts })
    }

    /// The kernel of a head in one part.
    pub(super) fn whole(&self) -> Option<&GemvQ4> {
        match &self.parts[..] {
            [(k, _)] => Some(k),
            _ => None,
        }
    }

    /// Workgroups of all parts (the fused argmax's partials).
    pub(super) fn workgroups(&self) -> u32 {
        self.parts.iter().map(|(k, _)| k.workgroups()).sum()
    }
}

/// Layer `i`'s matrix `j` in [`LayerWeights::matrices`] order (and
/// [`StepMatrices::codes`]' numbering).
pub(super) const QKV: usize = 0;
pub(super) const OUTPUT: usize = 1;
pub(super) const GATE_UP: usize = 2;
pub(super) const DOWN: usize = 3;

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
    fn folds_output(self, ctx: &ProfiledContext, shape: HeadShape) -> bool {
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
    /// 2 gate/up, 3 down; `None`: the head) when there is one (Q4 matrices on CPU
    /// adapters), else its buffer.
    pub(super) fn codes(
        &self,
        m: &'a MatrixBuffers,
        at: Option<(usize, usize)>,
    ) -> (&'a MatrixBuffers, Codes<'a>) {
        let texture = match (self.textures, at) {
            (Some(t), Some((i, j))) => t.layers[i][j].as_ref(),
            (Some(t), None) => t.head.as_ref(),
            (None, _) => None,
        };
        let codes = match texture {
            Some(t) => Codes::Texture(&t.view),
            None => Codes::Buffer(&m.codes),
        };
        (m, codes)
    }
}
