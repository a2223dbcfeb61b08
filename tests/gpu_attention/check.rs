//! One decode-attention check: a design (plain, or with W_o folded in) run on the GPU
//! against the CPU reference (output, KV cache and, folded, the W_o parts).

use crate::gpu_common::attention_ref::{attention_ref, pack_f16, rope, unpack_f16};
use crate::gpu_common::{assert_close, f16_round, rmsnorm, Rng};
use pocketrt::gpu::code_texture::MatrixCodes;
use pocketrt::gpu::forward::designs::Attention;
use pocketrt::gpu::kernels::common::attention::{
    AttentionInputs, AttentionVariant, OutputProjection, WoBlocks, WoFold,
};
use pocketrt::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, TextureOrder};
use pocketrt::gpu::kernels::common::q4_codes::CodesRead;
use pocketrt::gpu::kernels::common::rope_kv::{rope_inv_freq, HeadShape, KvBuffers};
use pocketrt::gpu::{ProfiledContext, StepUniform};
use pocketrt::quant::Q4Tensor;

/// A design to check: plain, or with this W_o folded in.
#[derive(Clone, Copy, Debug)]
pub enum Design {
    Plain(AttentionVariant),
    /// With this W_o folded in.
    Folded(AttentionVariant, WoFold),
}

impl Design {
    /// `variant` with a `hidden`-row W_o of `shape` folded in, its codes read from the
    /// storage buffer or the texture in `order`, spread in `blocks` (the group design).
    pub fn folded(
        variant: AttentionVariant,
        shape: HeadShape,
        hidden: usize,
        order: Option<TextureOrder>,
        blocks: WoBlocks,
    ) -> Design {
        let spec = GemvSpec::new(hidden, shape.n_heads * shape.head_dim, Epilogue::Store);
        let codes = CodesRead::new(order, &spec);
        let wo = WoFold {
            rows: hidden,
            codes,
            blocks,
        };
        Design::Folded(variant, wo)
    }
}

pub fn check_attention_design(
    ctx: &ProfiledContext,
    shape: HeadShape,
    qk_norm: bool,
    pos: usize,
    split_len: usize,
    seed: u64,
    design: Design,
) {
    let fold = match design {
        Design::Folded(_, wo) => Some(wo),
        Design::Plain(_) => None,
    };
    let hd = shape.head_dim;
    let (qd, kvd) = (shape.n_heads * hd, shape.n_kv_heads * hd);
    let mut rng = Rng::new(seed);
    let cache_len = shape.n_kv_heads * shape.context * hd;
    let history = |rng: &mut Rng| {
        let mut c = vec![0f32; cache_len];
        for kv in 0..shape.n_kv_heads {
            let at = kv * shape.context * hd;
            c[at..at + pos * hd].copy_from_slice(&rng.vec(pos * hd, 2.0));
        }
        pack_f16(&c)
    };
    let (kc, vc) = (history(&mut rng), history(&mut rng));
    let qkv = rng.vec(qd + 2 * kvd, 2.0);
    let (qn, kn) = (rng.vec(hd, 1.5), rng.vec(hd, 1.5));
    let inv_freq = rope_inv_freq(1e6, hd);
    let kernel = match design {
        Design::Folded(v, wo) => {
            Attention::with_output_projection(ctx, v, shape, qk_norm, 1e-6, split_len, wo)
        }
        Design::Plain(v) => Attention::with_variant(ctx, v, shape, qk_norm, 1e-6, split_len),
    }
    .unwrap();
    // Folded: a random Q4 W_o (hidden rows), its buffers (and texture) and the parts.
    let wo = fold.map(|wo| {
        let rows = wo.rows;
        let t = Q4Tensor::quantize(&rng.vec(rows * qd, 1.0), rows, qd).unwrap();
        let qparams = ctx.storage_init("wo qparams", &t.qparams).unwrap();
        let codes = MatrixCodes::upload(ctx, wo.codes, &t.codes, &qparams).unwrap();
        let parts = ctx
            .storage("parts", Attention::parts_bytes(shape, rows))
            .unwrap();
        (t, codes, qparams, parts)
    });
    let step = ctx.uniform("step", 16);
    let s = StepUniform {
        token: 0,
        pos: pos as u32,
        pad: [0; 2],
    };
    ctx.queue.write_buffer(&step, 0, bytemuck::bytes_of(&s));
    let b = |name: &str, v: &[f32]| ctx.storage_init(name, v).unwrap();
    let (qkv_b, qn_b, kn_b, f_b) = (
        b("qkv", &qkv),
        b("qn", &qn),
        b("kn", &kn),
        b("f", &inv_freq),
    );
    let (kb, vb) = (
        ctx.storage_init("k", &kc).unwrap(),
        ctx.storage_init("v", &vc).unwrap(),
    );
    let scores = ctx.storage("scores", kernel.scratch_bytes()).unwrap();
    let partials = ctx.storage("partials", kernel.partials_bytes()).unwrap();
    let out = ctx.storage("out", 4 * qd as u64).unwrap();
    let inputs = AttentionInputs {
        step: &step,
        qkv: &qkv_b,
        q_norm: &qn_b,
        k_norm: &kn_b,
        inv_freq: &f_b,
        cache: KvBuffers { k: &kb, v: &vb },
        scores: &scores,
        wo: wo
            .as_ref()
            .map(|(_, codes, qparams, parts)| OutputProjection {
                codes: codes.bind(),
                qparams,
                parts,
            }),
    };
    let d = kernel.dispatch(ctx, inputs, &partials, &out);
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        d.encode(&kernel, pos, &mut pass);
    }
    ctx.queue.submit([enc.finish()]);
    let got = ctx.read_f32(&out, qd).unwrap();

    let norm = |h: &[f32], w: &[f32]| {
        if qk_norm {
            rmsnorm(h, w, 1e-6)
        } else {
            h.to_vec()
        }
    };
    let q: Vec<f32> = qkv[..qd]
        .chunks(hd)
        .flat_map(|h| rope(&norm(h, &qn), pos, &inv_freq))
        .collect();
    let (mut kc, mut vc) = (unpack_f16(&kc), unpack_f16(&vc));
    for kv in 0..shape.n_kv_heads {
        let at = (kv * shape.context + pos) * hd;
        let k_now = rope(&norm(&qkv[qd + kv * hd..][..hd], &kn), pos, &inv_freq);
        let v_now = &qkv[qd + kvd + kv * hd..][..hd];
        for i in 0..hd {
            kc[at + i] = f16_round(k_now[i]);
            vc[at + i] = f16_round(v_now[i]);
        }
    }
    let what =
        format!("attention {design:?} {shape:?} qk_norm={qk_norm} pos={pos} split={split_len}");
    let want = attention_ref(&q, &kc, &vc, shape, pos + 1);
    assert_close(&what, &got, &want, 1e-4, 1e-5);
    if let Some((t, _, _, parts)) = &wo {
        let heads: Vec<_> = (0..kernel.parts()).map(|p| kernel.part_heads(p)).collect();
        let got = ctx.read_f32(parts, heads.len() * t.rows).unwrap();
        check_parts(&what, &got, t, &want, hd, &heads);
    }
    // The cache now holds this step's k and v (one f16 step of tolerance for k: the
    // f32 values may straddle a rounding edge) and nothing past it.
    let words = cache_len / 2;
    let (k_got, v_got) = (
        unpack_f16(&ctx.read_u32(&kb, words).unwrap()),
        unpack_f16(&ctx.read_u32(&vb, words).unwrap()),
    );
    assert_close(&format!("k cache {what}"), &k_got, &kc, 1e-3, 1e-5);
    assert_close(&format!("v cache {what}"), &v_got, &vc, 0.0, 0.0);
}

/// parts (one per range of `heads`, × rows) against the dequantized W_o times the
/// reference output `o` (n_heads · hd), part by part (the sum over the part's heads) and
/// summed over parts (f64 sums). The ranges must cover every head once.
fn check_parts(
    what: &str,
    parts: &[f32],
    wo: &Q4Tensor,
    o: &[f32],
    hd: usize,
    heads: &[std::ops::Range<usize>],
) {
    let covered: Vec<usize> = heads.iter().cloned().flatten().collect();
    let all: Vec<usize> = (0..o.len() / hd).collect();
    assert_eq!(covered, all, "{what}: the parts' heads");
    let (rows, n_parts) = (wo.rows, heads.len());
    let mut w = vec![0f32; wo.cols];
    let mut want = vec![0f32; n_parts * rows];
    for r in 0..rows {
        wo.dequantize_row(r, &mut w);
        for (p, range) in heads.iter().enumerate() {
            let cols = range.start * hd..range.end * hd;
            let d: f64 = w[cols.clone()]
                .iter()
                .zip(&o[cols])
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            want[p * rows + r] = d as f32;
        }
    }
    let max_heads = heads.iter().map(|h| h.len()).max().unwrap_or(1);
    let tol = 1e-5 * ((max_heads * hd) as f32).sqrt();
    assert_close(&format!("parts {what}"), parts, &want, 1e-4, tol);
    let sum = |v: &[f32]| -> Vec<f32> {
        (0..rows)
            .map(|r| {
                (0..n_parts)
                    .map(|p| f64::from(v[p * rows + r]))
                    .sum::<f64>() as f32
            })
            .collect()
    };
    let tol = 1e-5 * (wo.cols as f32).sqrt();
    assert_close(
        &format!("Σ parts {what}"),
        &sum(parts),
        &sum(&want),
        1e-4,
        tol,
    );
}
