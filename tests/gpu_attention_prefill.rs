//! Prefill attention kernels against CPU references: the batched q/k-norm + RoPE + KV
//! write (rope_kv_prefill) for a whole chunk, then causal flash attention
//! (attention_prefill) of the chunk's queries over the cache, at total lengths 1, 63, 64,
//! 65, 1000, 4097 and 24,576 (the longest batched prefill), with Pocket's head shape (14 q
//! heads, 2 KV heads, head_dim 64), and a small GQA shape. For long lengths the positions before the chunk hold random
//! f16 keys/values (as earlier chunks would) and a sample of the chunk's queries is
//! compared, to keep it quick on lavapipe.
//!
//! Tolerances: q as rope_kv's test (2e-6); the attention reference runs in f64 on the
//! GPU's own q and f16 cache, so only the kernel's f32 accumulation differs (1e-5 rel).

mod gpu_common;

use gpu_common::attention_ref::{attention_ref, pack_f16, rope, unpack_f16};
use gpu_common::{assert_close, f16_round, gpu, rmsnorm, Rng};
use pocketrt::gpu::forward::PREFILL_MAX_POSITIONS;
use pocketrt::gpu::kernels::common::attention_prefill::{
    AttentionPrefill, AttentionPrefillVariant,
};
use pocketrt::gpu::kernels::common::gemm::ChunkUniform;
use pocketrt::gpu::kernels::common::rope_kv::{rope_inv_freq, HeadShape, KvBuffers};
use pocketrt::gpu::kernels::rope_kv_prefill::RopeKvPrefill;
use pocketrt::gpu::kernels::run;

const THETA: f32 = 1e6;
const EPS: f32 = 1e-6;

/// Run the chunk of `count` tokens at positions `start..` (cache length `shape.context`
/// = the total length) and check q, the chunk's cache entries and the attention output
/// of the queries in `sample` (chunk indices; all when empty).
fn check(shape: HeadShape, start: usize, count: usize, qk_norm: bool, sample: &[usize], seed: u64) {
    let ctx = gpu();
    let hd = shape.head_dim;
    let (qd, kvd) = (shape.n_heads * hd, shape.n_kv_heads * hd);
    let mut rng = Rng::new(seed);
    // Earlier positions: random f16 keys and values; the chunk's positions: zero.
    let cache_len = shape.n_kv_heads * shape.context * hd;
    let fill = |rng: &mut Rng| {
        let mut c = vec![0f32; cache_len];
        for kv in 0..shape.n_kv_heads {
            for v in &mut c[kv * shape.context * hd..][..start * hd] {
                *v = rng.uniform() * 2.0;
            }
        }
        pack_f16(&c)
    };
    let (kc0, vc0) = (fill(&mut rng), fill(&mut rng));
    let qkv = rng.vec(count * (qd + 2 * kvd), 2.0);
    let (qn, kn) = (rng.vec(hd, 1.5), rng.vec(hd, 1.5));
    let inv_freq = rope_inv_freq(THETA, hd);

    let chunk = ctx.uniform("chunk", 16);
    let u = ChunkUniform {
        start: start as u32,
        count: count as u32,
        pad: [0; 2],
    };
    ctx.queue.write_buffer(&chunk, 0, bytemuck::bytes_of(&u));
    let b = |name: &str, v: &[f32]| ctx.storage_init(name, v).unwrap();
    let (qkv_b, qn_b, kn_b, f_b) = (
        b("qkv", &qkv),
        b("qn", &qn),
        b("kn", &kn),
        b("f", &inv_freq),
    );
    let q_out = ctx.storage("q", 4 * (count * qd) as u64).unwrap();
    let out = ctx.storage("out", 4 * (count * qd) as u64).unwrap();
    let kb = ctx.storage_init("k", &kc0).unwrap();
    let vb = ctx.storage_init("v", &vc0).unwrap();
    let cache = KvBuffers { k: &kb, v: &vb };
    let rope_kernel = RopeKvPrefill::new(ctx, shape, qk_norm, EPS).unwrap();
    let d1 = rope_kernel.dispatch(
        ctx, &chunk, &qkv_b, &qn_b, &kn_b, &f_b, &q_out, cache, count,
    );
    run(ctx, &[&d1]);

    let what = format!("{shape:?} start {start} count {count}");
    let q_gpu = ctx.read_f32(&q_out, count * qd).unwrap();
    let words = cache_len / 2;
    let kc = unpack_f16(&ctx.read_u32(&kb, words).unwrap());
    let vc = unpack_f16(&ctx.read_u32(&vb, words).unwrap());
    let norm = |h: &[f32], w: &[f32]| {
        if qk_norm {
            rmsnorm(h, w, EPS)
        } else {
            h.to_vec()
        }
    };
    let mut want_q = Vec::with_capacity(count * qd);
    for t in 0..count {
        let pos = start + t;
        let row = &qkv[t * (qd + 2 * kvd)..][..qd + 2 * kvd];
        for h in row[..qd].chunks(hd) {
            want_q.extend(rope(&norm(h, &qn), pos, &inv_freq));
        }
        for kv in 0..shape.n_kv_heads {
            let k = rope(&norm(&row[qd + kv * hd..][..hd], &kn), pos, &inv_freq);
            let at = |c: &[f32]| c[(kv * shape.context + pos) * hd..][..hd].to_vec();
            // One f16 rounding step of tolerance (the f32 values may straddle an edge).
            assert_close(&format!("k {what} pos {pos}"), &at(&kc), &k, 1e-3, 1e-4);
            let v: Vec<f32> = row[qd + kvd + kv * hd..][..hd]
                .iter()
                .map(|v| f16_round(*v))
                .collect();
            assert_close(&format!("v {what} pos {pos}"), &at(&vc), &v, 0.0, 0.0);
        }
    }
    assert_close(&format!("q {what}"), &q_gpu, &want_q, 1e-5, 1e-5);

    let all: Vec<usize> = (0..count).collect();
    let queries = if sample.is_empty() { &all[..] } else { sample };
    let want: Vec<Vec<f32>> = queries
        .iter()
        .map(|&t| attention_ref(&q_gpu[t * qd..][..qd], &kc, &vc, shape, start + t + 1))
        .collect();
    for variant in VARIANTS {
        let attention = AttentionPrefill::with_variant(ctx, variant, shape).unwrap();
        let d2 = attention.dispatch(ctx, &chunk, &q_out, cache, &out, count);
        run(ctx, &[&d2]);
        let got = ctx.read_f32(&out, count * qd).unwrap();
        for (&t, want) in queries.iter().zip(&want) {
            assert_close(
                &format!("attention {variant:?} {what} query {t}"),
                &got[t * qd..][..qd],
                want,
                1e-5,
                1e-6,
            );
        }
    }
}

/// Every case runs in both designs, whatever the adapter.
const VARIANTS: [AttentionPrefillVariant; 2] = [
    AttentionPrefillVariant::KeyTiles,
    AttentionPrefillVariant::Lanes,
];

fn pocket(context: usize) -> HeadShape {
    HeadShape {
        n_heads: 14,
        n_kv_heads: 2,
        head_dim: 64,
        context,
    }
}

#[test]
fn prefill_attention_from_position_0_at_lengths_1_63_64_65() {
    for (len, seed) in [(1, 1), (63, 2), (64, 3), (65, 4)] {
        check(pocket(len), 0, len, true, &[], seed);
    }
}

#[test]
fn prefill_attention_chunk_after_cached_positions_at_length_1000() {
    check(
        pocket(1000),
        744,
        256,
        true,
        &[0, 1, 63, 64, 127, 200, 255],
        5,
    );
}

#[test]
fn prefill_attention_at_length_4097() {
    check(pocket(4097), 4032, 65, true, &[0, 31, 63, 64], 6);
}

/// The longest prefill attention the engine uses (`PREFILL_MAX_POSITIONS`, 32,768 keys).
/// With a score pass and a value pass per key tile the kernel drifted by ~1e-2 past
/// ~28K keys on lavapipe: mesa's loop limiter ends all of a shader's loops after 65,535
/// iterations in all; the one-pass loop stays under it to ~51K keys.
#[test]
fn prefill_attention_at_length_32768() {
    check(
        pocket(PREFILL_MAX_POSITIONS),
        PREFILL_MAX_POSITIONS - 64,
        64,
        true,
        &[0, 17, 63],
        7,
    );
}

#[test]
fn prefill_attention_small_gqa_heads_without_qk_norm() {
    let shape = HeadShape {
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 16,
        context: 300,
    };
    check(shape, 37, 130, false, &[], 8);
    let wide = HeadShape {
        n_heads: 3,
        n_kv_heads: 1,
        head_dim: 256,
        context: 90,
    };
    check(wide, 10, 80, true, &[0, 5, 79], 9);
}

/// q within 1e-5 at a late position: sin_cos (rope_common.wgsl, shared by every RoPE
/// kernel) reduces large angles first.
#[test]
fn prefill_rope_stays_accurate_at_position_40959() {
    let shape = HeadShape {
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 64,
        context: 40_960,
    };
    check(shape, 40_959, 1, true, &[0], 10);
}
