//! q/k-norm + RoPE + KV write, and decode attention, against CPU references.

mod gpu_common;

use gpu_common::{assert_close, f16_round, gpu, rmsnorm, Rng};
use half::f16;
use pocketrt::gpu::kernels::attention::Attention;
use pocketrt::gpu::kernels::rope_kv::{rope_inv_freq, HeadShape, KvBuffers, RopeKv};
use pocketrt::gpu::kernels::run;
use pocketrt::gpu::StepUniform;

fn pack_f16(v: &[f32]) -> Vec<u32> {
    v.chunks_exact(2)
        .map(|p| {
            u32::from(f16::from_f32(p[0]).to_bits())
                | (u32::from(f16::from_f32(p[1]).to_bits()) << 16)
        })
        .collect()
}

fn unpack_f16(w: &[u32]) -> Vec<f32> {
    w.iter()
        .flat_map(|x| {
            [
                f16::from_bits(*x as u16).to_f32(),
                f16::from_bits((*x >> 16) as u16).to_f32(),
            ]
        })
        .collect()
}

/// Reference neox RoPE of one head at `pos` (angles as the kernel forms them: an f32
/// product, then sin/cos in f64).
fn rope(head: &[f32], pos: usize, inv_freq: &[f32]) -> Vec<f32> {
    let half = head.len() / 2;
    let mut out = head.to_vec();
    for i in 0..half {
        let a = f64::from(pos as f32 * inv_freq[i]);
        let (s, c) = a.sin_cos();
        let (x0, x1) = (f64::from(head[i]), f64::from(head[i + half]));
        out[i] = (x0 * c - x1 * s) as f32;
        out[i + half] = (x0 * s + x1 * c) as f32;
    }
    out
}

fn check_rope_kv(shape: HeadShape, qk_norm: bool, pos: usize, seed: u64) {
    let ctx = gpu();
    let hd = shape.head_dim;
    let (qd, kvd) = (shape.n_heads * hd, shape.n_kv_heads * hd);
    let mut rng = Rng::new(seed);
    let qkv = rng.vec(qd + 2 * kvd, 2.0);
    let (qn, kn) = (rng.vec(hd, 1.5), rng.vec(hd, 1.5));
    let inv_freq = rope_inv_freq(1e6, hd);
    let kernel = RopeKv::new(ctx, shape, qk_norm, 1e-6).unwrap();
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
    let q_out = ctx.storage("q", 4 * qd as u64).unwrap();
    let k_cache = ctx.storage("k", shape.cache_bytes()).unwrap();
    let v_cache = ctx.storage("v", shape.cache_bytes()).unwrap();
    let d = kernel.dispatch(
        ctx,
        &step,
        &qkv_b,
        &qn_b,
        &kn_b,
        &f_b,
        &q_out,
        KvBuffers {
            k: &k_cache,
            v: &v_cache,
        },
    );
    run(ctx, &[&d]);

    let norm = |h: &[f32], w: &[f32]| {
        if qk_norm {
            rmsnorm(h, w, 1e-6)
        } else {
            h.to_vec()
        }
    };
    let want_q: Vec<f32> = qkv[..qd]
        .chunks(hd)
        .flat_map(|h| rope(&norm(h, &qn), pos, &inv_freq))
        .collect();
    let what = format!("{shape:?} qk_norm={qk_norm} pos={pos}");
    assert_close(
        &format!("q {what}"),
        &ctx.read_f32(&q_out, qd).unwrap(),
        &want_q,
        2e-6,
        2e-6,
    );

    let words = (shape.cache_bytes() / 4) as usize;
    let kc = unpack_f16(&ctx.read_u32(&k_cache, words).unwrap());
    let vc = unpack_f16(&ctx.read_u32(&v_cache, words).unwrap());
    for kv in 0..shape.n_kv_heads {
        let at = |c: &[f32], p: usize| c[(kv * shape.context + p) * hd..][..hd].to_vec();
        let k_src = &qkv[qd + kv * hd..][..hd];
        let v_src = &qkv[qd + kvd + kv * hd..][..hd];
        let want_k: Vec<f32> = rope(&norm(k_src, &kn), pos, &inv_freq);
        // One f16 rounding step of tolerance: the f32 values may straddle a rounding edge.
        assert_close(&format!("k {what}"), &at(&kc, pos), &want_k, 1e-3, 1e-5);
        let want_v: Vec<f32> = v_src.iter().map(|v| f16_round(*v)).collect();
        assert_close(&format!("v {what}"), &at(&vc, pos), &want_v, 0.0, 0.0);
        // Other positions stay untouched (zero).
        let other = if pos == 0 { 1 } else { 0 };
        assert!(at(&kc, other)
            .iter()
            .chain(&at(&vc, other))
            .all(|v| *v == 0.0));
    }
}

#[test]
fn rope_kv_with_qk_norm_matches_reference_at_first_and_last_position() {
    let shape = HeadShape {
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        context: 50,
    };
    check_rope_kv(shape, true, 0, 1);
    check_rope_kv(shape, true, 49, 2);
    let wide = HeadShape {
        n_heads: 3,
        n_kv_heads: 1,
        head_dim: 256,
        context: 8,
    };
    check_rope_kv(wide, true, 7, 3);
}

#[test]
fn rope_kv_without_qk_norm_matches_reference() {
    let shape = HeadShape {
        n_heads: 14,
        n_kv_heads: 2,
        head_dim: 128,
        context: 20,
    };
    check_rope_kv(shape, false, 13, 4);
}

#[test]
fn rope_stays_accurate_at_position_40959() {
    let shape = HeadShape {
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 64,
        context: 40_960,
    };
    check_rope_kv(shape, true, 40_959, 5);
}

/// Reference attention of every q head against caches holding `len` positions.
fn attention_ref(q: &[f32], kc: &[f32], vc: &[f32], s: HeadShape, len: usize) -> Vec<f32> {
    let hd = s.head_dim;
    let group = s.n_heads / s.n_kv_heads;
    let mut out = vec![0f32; s.n_heads * hd];
    for h in 0..s.n_heads {
        let kv = h / group;
        let qh = &q[h * hd..][..hd];
        let row = |c: &'_ [f32], t: usize| c[(kv * s.context + t) * hd..][..hd].to_vec();
        let scores: Vec<f64> = (0..len)
            .map(|t| {
                let k = row(kc, t);
                qh.iter()
                    .zip(&k)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum::<f64>()
                    / (hd as f64).sqrt()
            })
            .collect();
        let m = scores.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
        let l: f64 = e.iter().sum();
        for (t, p) in e.iter().enumerate() {
            for (o, v) in out[h * hd..][..hd].iter_mut().zip(row(vc, t)) {
                *o += (p / l * f64::from(v)) as f32;
            }
        }
    }
    out
}

fn check_attention(shape: HeadShape, pos: usize, seed: u64) {
    let ctx = gpu();
    let mut rng = Rng::new(seed);
    let cache_len = shape.n_kv_heads * shape.context * shape.head_dim;
    let (kc, vc) = (rng.vec(cache_len, 2.0), rng.vec(cache_len, 2.0));
    let (kc, vc) = (pack_f16(&kc), pack_f16(&vc));
    let q = rng.vec(shape.n_heads * shape.head_dim, 2.0);
    let kernel = Attention::new(ctx, shape).unwrap();
    let step = ctx.uniform("step", 16);
    let s = StepUniform {
        token: 0,
        pos: pos as u32,
        pad: [0; 2],
    };
    ctx.queue.write_buffer(&step, 0, bytemuck::bytes_of(&s));
    let qb = ctx.storage_init("q", &q).unwrap();
    let (kb, vb) = (
        ctx.storage_init("k", &kc).unwrap(),
        ctx.storage_init("v", &vc).unwrap(),
    );
    let scores = ctx.storage("scores", kernel.scratch_bytes()).unwrap();
    let out = ctx.storage("out", 4 * q.len() as u64).unwrap();
    run(
        ctx,
        &[&kernel.dispatch(ctx, &step, &qb, KvBuffers { k: &kb, v: &vb }, &scores, &out)],
    );
    let got = ctx.read_f32(&out, q.len()).unwrap();
    let want = attention_ref(&q, &unpack_f16(&kc), &unpack_f16(&vc), shape, pos + 1);
    assert_close(
        &format!("attention {shape:?} pos={pos}"),
        &got,
        &want,
        1e-5,
        1e-6,
    );
}

#[test]
fn attention_matches_reference_at_position_0_and_at_the_cache_end() {
    let shape = HeadShape {
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        context: 100,
    };
    check_attention(shape, 0, 1);
    check_attention(shape, 99, 2);
}

#[test]
fn attention_matches_reference_with_pocket_heads_and_long_history() {
    let shape = HeadShape {
        n_heads: 14,
        n_kv_heads: 2,
        head_dim: 64,
        context: 300,
    };
    check_attention(shape, 257, 3);
    let wide = HeadShape {
        n_heads: 2,
        n_kv_heads: 2,
        head_dim: 256,
        context: 70,
    };
    check_attention(wide, 65, 4);
}

#[test]
fn attention_shapes_that_do_not_divide_are_rejected() {
    let bad = HeadShape {
        n_heads: 3,
        n_kv_heads: 2,
        head_dim: 64,
        context: 10,
    };
    assert!(Attention::new(gpu(), bad).is_err());
    let too_wide = HeadShape {
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 512,
        context: 10,
    };
    assert!(RopeKv::new(gpu(), too_wide, false, 1e-6).is_err());
}
