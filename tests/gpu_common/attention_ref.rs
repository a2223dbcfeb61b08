//! CPU references for the attention kernels' tests (decode and prefill): f16 cache
//! packing, neox RoPE with the kernels' angles, and causal attention in f64.

use half::f16;
use pocketrt::gpu::kernels::common::rope_kv::HeadShape;

/// f32 values as packed f16 pairs (the KV cache's layout).
pub fn pack_f16(v: &[f32]) -> Vec<u32> {
    v.chunks_exact(2)
        .map(|p| {
            u32::from(f16::from_f32(p[0]).to_bits())
                | (u32::from(f16::from_f32(p[1]).to_bits()) << 16)
        })
        .collect()
}

/// Packed f16 pairs back to f32.
pub fn unpack_f16(w: &[u32]) -> Vec<f32> {
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
pub fn rope(head: &[f32], pos: usize, inv_freq: &[f32]) -> Vec<f32> {
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

/// Reference attention of every q head against caches holding `len` positions.
pub fn attention_ref(q: &[f32], kc: &[f32], vc: &[f32], s: HeadShape, len: usize) -> Vec<f32> {
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
        let mut acc = vec![0f64; hd];
        for (t, p) in e.iter().enumerate() {
            for (o, v) in acc.iter_mut().zip(row(vc, t)) {
                *o += p / l * f64::from(v);
            }
        }
        for (o, a) in out[h * hd..][..hd].iter_mut().zip(acc) {
            *o = a as f32;
        }
    }
    out
}
