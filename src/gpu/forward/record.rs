//! The decode step recorded as the model reads, a named call per sub-layer: embed → for
//! each layer [norm + QKV, q/k-norm + RoPE + KV write + attention (+ the output
//! projection's parts), (O + residual when not folded,) residual + parts → norm + gate/up
//! + SwiGLU, down + residual] → norm + head → argmax.

use super::step::{
    Kernels, RoleGemv, StepDispatch, StepKernel, StepMatrices, StepWork, DOWN, GATE_UP, OUTPUT, QKV,
};
use super::Activations;
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::common::attention::{AttentionInputs, OutputProjection};
use crate::gpu::kernels::common::gemv::{GemvQ4, HeadArgmax, ResidualParts};
use crate::gpu::kernels::common::q4_codes::{Codes, CodesRead};
use crate::gpu::kernels::common::rope_kv::KvBuffers;
use crate::gpu::kernels::embed_q4::table_bindings;
use crate::gpu::kv_cache::KvCache;
use crate::gpu::weights::{LayerWeights, MatrixBuffers};

/// The decode step's dispatches, in order.
pub(super) fn record_step(
    ctx: &GpuContext,
    kernels: &Kernels,
    matrices: &StepMatrices,
    kv: &KvCache,
    acts: &Activations,
    step: &wgpu::Buffer,
) -> Vec<StepDispatch> {
    let layers = &matrices.weights.layers;
    let folded = kernels.attn_output.is_none();
    let mut r = Recorder {
        ctx,
        k: kernels,
        m: matrices,
        a: acts,
        step,
        out: vec![],
    };
    let mut h = Residual::new(acts, folded, layers.len());
    r.embed(h.now());
    for (i, layer) in layers.iter().enumerate() {
        r.qkv(i, layer, h.now());
        r.attention(i, layer, kv);
        if folded {
            let (from, to) = h.advance();
            r.gate_up_adding_parts(i, layer, from, to);
        } else {
            r.output_projection(i, layer, h.now());
            r.gate_up(i, layer, h.now());
        }
        r.down(i, layer, h.now());
    }
    debug_assert!(
        h.ends_in_h(),
        "the last layer leaves the residual in acts.h"
    );
    r.head(h.now());
    r.argmax();
    r.out
}

/// The residual stream's buffer. With W_o folded into attention it ping-pongs: layer i's
/// gate/up reads the current buffer (+ the attention's parts) and stores the sum to the
/// other, which becomes current. The embedding starts where the last layer then ends in
/// `acts.h` (what the head reads and prefill's last row is copied to).
struct Residual<'a> {
    /// `acts.h`, `acts.h_alt`.
    buffers: [&'a wgpu::Buffer; 2],
    at: usize,
}

impl<'a> Residual<'a> {
    fn new(acts: &'a Activations, folded: bool, layers: usize) -> Self {
        Residual {
            buffers: [&acts.h, &acts.h_alt],
            at: usize::from(folded && layers % 2 == 1),
        }
    }

    fn now(&self) -> &'a wgpu::Buffer {
        self.buffers[self.at]
    }

    /// Move to the other buffer: (the one left, the one now current).
    fn advance(&mut self) -> (&'a wgpu::Buffer, &'a wgpu::Buffer) {
        let from = self.now();
        self.at ^= 1;
        (from, self.now())
    }

    fn ends_in_h(&self) -> bool {
        self.at == 0
    }
}

/// One GEMV's inputs by name (absent ones bound to a stand-in buffer).
struct Gemv<'a> {
    matrix: (&'a MatrixBuffers, Codes<'a>),
    x: &'a wgpu::Buffer,
    norm: Option<&'a wgpu::Buffer>,
    bias: Option<&'a wgpu::Buffer>,
    out: &'a wgpu::Buffer,
    parts: Option<ResidualParts<'a>>,
}

struct Recorder<'a> {
    ctx: &'a GpuContext,
    k: &'a Kernels,
    m: &'a StepMatrices<'a>,
    a: &'a Activations,
    step: &'a wgpu::Buffer,
    out: Vec<StepDispatch>,
}

impl<'a> Recorder<'a> {
    fn push(&mut self, kernel: StepKernel, work: StepWork) {
        self.out.push(StepDispatch { kernel, work });
    }

    fn gemv(&mut self, kernel: StepKernel, role: &RoleGemv, g: Gemv) {
        self.gemv_in(kernel, role.of(g.matrix.0), g);
    }

    fn gemv_in(&mut self, kernel: StepKernel, gemv: &GemvQ4, g: Gemv) {
        let (m, codes) = g.matrix;
        let bias = g.bias.unwrap_or(&self.a.none);
        let d = gemv.dispatch_adding(
            self.ctx, codes, &m.qparams, g.x, g.norm, bias, g.out, g.parts,
        );
        self.push(kernel, StepWork::Fixed(d));
    }

    /// Layer `i`'s matrix `j` with its codes as the decode GEMVs read them.
    fn matrix(&self, i: usize, j: usize, m: &'a MatrixBuffers) -> (&'a MatrixBuffers, Codes<'a>) {
        self.m.codes(m, Some((i, j)))
    }

    /// h = the embedding of the step's token (or of the previous step's argmax).
    fn embed(&mut self, h: &wgpu::Buffer) {
        let prev = &self.a.argmax;
        let e = (self.m.weights)
            .embedding_parts(self.ctx)
            .expect("the embedding's parts, as its kernel was made");
        let d = self
            .k
            .embed
            .dispatch(self.ctx, self.step, table_bindings(&e), h, prev);
        self.push(StepKernel::Embed, StepWork::Fixed(d));
    }

    /// qkv = W_qkv · rmsnorm(h) (+ bias).
    fn qkv(&mut self, i: usize, l: &'a LayerWeights, h: &'a wgpu::Buffer) {
        let g = Gemv {
            matrix: self.matrix(i, QKV, &l.qkv),
            x: h,
            norm: Some(&l.attn_norm),
            bias: l.qkv_bias.as_ref(),
            out: &self.a.qkv,
            parts: None,
        };
        self.gemv(StepKernel::Qkv, &self.k.qkv, g);
    }

    /// q/k-norm + RoPE, this position's k and v into layer `i`'s cache, attention over
    /// the history into `attn` (and with W_o folded in, its parts).
    fn attention(&mut self, i: usize, l: &'a LayerWeights, kv: &'a KvCache) {
        let a = self.a;
        let (q_norm, k_norm) = match &l.qk_norm {
            Some((q, k)) => (q, k),
            None => (&a.none, &a.none),
        };
        let wo = self.k.attention.wo.map(|wo| OutputProjection {
            codes: match wo.codes {
                CodesRead::Buffer => Codes::Buffer(&l.attn_output.codes),
                _ => self.matrix(i, OUTPUT, &l.attn_output).1,
            },
            qparams: &l.attn_output.qparams,
            parts: &a.parts,
        });
        let inputs = AttentionInputs {
            step: self.step,
            qkv: &a.qkv,
            q_norm,
            k_norm,
            inv_freq: &a.inv_freq,
            cache: KvBuffers {
                k: &kv.k[i],
                v: &kv.v[i],
            },
            scores: &a.scores,
            wo,
        };
        let d = self
            .k
            .attention
            .dispatch(self.ctx, inputs, &a.partials, &a.attn);
        self.push(StepKernel::Attention, StepWork::Attention(d));
    }

    /// h += W_o · attn (W_o not folded).
    fn output_projection(&mut self, i: usize, l: &'a LayerWeights, h: &'a wgpu::Buffer) {
        let o = self
            .k
            .attn_output
            .as_ref()
            .expect("an O GEMV when W_o is not folded");
        let g = Gemv {
            matrix: self.matrix(i, OUTPUT, &l.attn_output),
            x: &self.a.attn,
            norm: None,
            bias: None,
            out: h,
            parts: None,
        };
        self.gemv(StepKernel::Output, o, g);
    }

    /// ffn = SwiGLU(W_gate_up · rmsnorm(h)).
    fn gate_up(&mut self, i: usize, l: &'a LayerWeights, h: &'a wgpu::Buffer) {
        self.gate_up_with(i, l, h, None);
    }

    /// next = h + Σ parts (stored), then ffn = SwiGLU(W_gate_up · rmsnorm(next)).
    fn gate_up_adding_parts(
        &mut self,
        i: usize,
        l: &'a LayerWeights,
        h: &'a wgpu::Buffer,
        next: &'a wgpu::Buffer,
    ) {
        let parts = ResidualParts {
            parts: &self.a.parts,
            h_out: next,
        };
        self.gate_up_with(i, l, h, Some(parts));
    }

    fn gate_up_with(
        &mut self,
        i: usize,
        l: &'a LayerWeights,
        h: &'a wgpu::Buffer,
        parts: Option<ResidualParts<'a>>,
    ) {
        let g = Gemv {
            matrix: self.matrix(i, GATE_UP, &l.gate_up),
            x: h,
            norm: Some(&l.ffn_norm),
            bias: None,
            out: &self.a.ffn,
            parts,
        };
        self.gemv(StepKernel::GateUp, &self.k.gate_up, g);
    }

    /// h += W_down · ffn.
    fn down(&mut self, i: usize, l: &'a LayerWeights, h: &'a wgpu::Buffer) {
        let g = Gemv {
            matrix: self.matrix(i, DOWN, &l.down),
            x: &self.a.ffn,
            norm: None,
            bias: None,
            out: h,
            parts: None,
        };
        self.gemv(StepKernel::Down, &self.k.down, g);
    }

    /// logits = W_head · rmsnorm(h) (on GPUs with each workgroup's best logit).
    fn head(&mut self, h: &'a wgpu::Buffer) {
        let w = self.m.weights;
        let Some(head) = self.k.head.whole() else {
            return self.head_in_parts(h);
        };
        if self.k.argmax_partials.is_some() {
            let (m, codes) = self.m.codes(w.head(), None);
            let a = self.a;
            let fused = HeadArgmax {
                mask: &a.mask,
                partials: &a.head_partials,
            };
            let norm = Some(&w.output_norm);
            let d = head.dispatch_argmax(
                self.ctx, codes, &m.qparams, h, norm, &a.none, &a.logits, fused,
            );
            return self.push(StepKernel::Head, StepWork::Fixed(d));
        }
        let g = Gemv {
            matrix: self.m.codes(w.head(), None),
            x: h,
            norm: Some(&w.output_norm),
            bias: None,
            out: &self.a.logits,
            parts: None,
        };
        self.gemv_in(StepKernel::Head, head, g);
    }

    /// [`Recorder::head`] over a head bound in parts, one GEMV each.
    fn head_in_parts(&mut self, h: &'a wgpu::Buffer) {
        let (w, a) = (self.m.weights, self.a);
        let parts = w
            .head()
            .parts(self.ctx.limits.max_storage_buffer_binding_size)
            .expect("the head's parts, as its kernels were made");
        let fused = self.k.argmax_partials.as_ref().map(|_| HeadArgmax {
            mask: &a.mask,
            partials: &a.head_partials,
        });
        let norm = Some(&w.output_norm);
        for ((gemv, rows), part) in self.k.head.parts.iter().zip(&parts) {
            assert_eq!(rows, &part.rows);
            let d = gemv.dispatch_part(self.ctx, part, h, norm, &a.logits, fused);
            self.push(StepKernel::Head, StepWork::Fixed(d));
        }
    }

    /// The argmax of the logits (on GPUs: of the head's workgroup bests).
    fn argmax(&mut self) {
        let a = self.a;
        let d = match &self.k.argmax_partials {
            Some(p) => p.dispatch(self.ctx, &a.head_partials, &a.argmax),
            None => self
                .k
                .argmax
                .dispatch(self.ctx, &a.logits, &a.argmax, &a.mask),
        };
        self.push(StepKernel::Argmax, StepWork::Fixed(d));
    }
}
