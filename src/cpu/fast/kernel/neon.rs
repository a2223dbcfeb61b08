//! NEON kernels: one group (64 weights, 32 code bytes) per iteration, as two 16-byte
//! halves. Int8: nibbles (0..=15, so also valid i8) times activation bytes in
//! `smull`/`smlal2` (two products per i16 lane: at most 2·15·127), pairwise-widened into
//! i32 lanes with `sadalp`, then converted and scaled by `scale · d`. F32: nibbles widened
//! to f32 four at a time into FMAs.

use super::super::acts::Acts;
use super::WORDS;
use crate::quant::{unpack_params, GROUP};
use std::arch::aarch64::*;

/// `acc + Σ a·b` over 16 byte pairs, widened into 4 i32 lanes.
#[inline(always)]
unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    vpadalq_s16(acc, vmlal_high_s8(p, a, b))
}

/// # Safety
/// `codes`, `params` and `acts` must hold `out.len()` rows of `groups` groups (checked by
/// `Kernel::rows`). NEON is part of every aarch64 CPU.
#[target_feature(enable = "neon")]
pub unsafe fn rows_i8(codes: &[u32], params: &[u32], groups: usize, acts: &Acts, out: &mut [f32]) {
    let mask = vdupq_n_u8(0x0F);
    let q = acts.q.as_ptr();
    for (r, o) in out.iter_mut().enumerate() {
        let c = codes.as_ptr().add(r * groups * WORDS) as *const u8;
        let mut acc = vdupq_n_f32(0.0);
        let mut mins = 0.0f32;
        for g in 0..groups {
            let bytes = c.add(g * WORDS * 4);
            let x = q.add(g * GROUP);
            let mut sums = vdupq_n_s32(0);
            for half in 0..2 {
                let w = vld1q_u8(bytes.add(16 * half));
                let lo = vreinterpretq_s8_u8(vandq_u8(w, mask));
                let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(w));
                sums = dot16(sums, lo, vld1q_s8(x.add(16 * half)));
                sums = dot16(sums, hi, vld1q_s8(x.add(32 + 16 * half)));
            }
            let (scale, min) = unpack_params(params[r * groups + g]);
            let [d, sum] = acts.ds[g];
            acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sums), scale * d);
            mins += min * sum;
        }
        *o = vaddvq_f32(acc) + mins;
    }
}

/// `acc + Σ nibble·x` over the 16 nibbles of `v` and `x[0..16]`.
#[inline(always)]
unsafe fn fma16(acc: float32x4_t, v: uint8x16_t, x: *const f32) -> float32x4_t {
    let (l, h) = (vmovl_u8(vget_low_u8(v)), vmovl_high_u8(v));
    let f = |w: uint32x4_t| vcvtq_f32_u32(w);
    let acc = vfmaq_f32(acc, f(vmovl_u16(vget_low_u16(l))), vld1q_f32(x));
    let acc = vfmaq_f32(acc, f(vmovl_high_u16(l)), vld1q_f32(x.add(4)));
    let acc = vfmaq_f32(acc, f(vmovl_u16(vget_low_u16(h))), vld1q_f32(x.add(8)));
    vfmaq_f32(acc, f(vmovl_high_u16(h)), vld1q_f32(x.add(12)))
}

/// # Safety
/// As [`rows_i8`], with f32 activations.
#[target_feature(enable = "neon")]
pub unsafe fn rows_f32(codes: &[u32], params: &[u32], groups: usize, acts: &Acts, out: &mut [f32]) {
    let mask = vdupq_n_u8(0x0F);
    let x = acts.x.as_ptr();
    for (r, o) in out.iter_mut().enumerate() {
        let c = codes.as_ptr().add(r * groups * WORDS) as *const u8;
        let mut acc = vdupq_n_f32(0.0);
        let mut mins = 0.0f32;
        for g in 0..groups {
            let bytes = c.add(g * WORDS * 4);
            let xg = x.add(g * GROUP);
            let mut s = vdupq_n_f32(0.0);
            for half in 0..2 {
                let w = vld1q_u8(bytes.add(16 * half));
                s = fma16(s, vandq_u8(w, mask), xg.add(16 * half));
                s = fma16(s, vshrq_n_u8::<4>(w), xg.add(32 + 16 * half));
            }
            let (scale, min) = unpack_params(params[r * groups + g]);
            acc = vfmaq_n_f32(acc, s, scale);
            mins += min * acts.ds[g][1];
        }
        *o = vaddvq_f32(acc) + mins;
    }
}
