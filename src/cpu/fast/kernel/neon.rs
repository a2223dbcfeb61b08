//! NEON kernels: one group (64 weights, 32 code bytes) per iteration, as two 16-byte
//! halves. Int8: nibbles (0..=15, so also valid i8) times activation bytes in
//! `smull`/`smlal` summed into i32 lanes of four consecutive bytes (`Int8Sum`'s lanes);
//! with FEAT_DotProd `sdot` (four products into each i32 lane) does it in one instruction
//! per 16 bytes. The lanes are scaled in `Int8Sum`'s order (a multiply, then an add), so
//! the results equal the scalar kernel's bit for bit. Up to
//! `TILE` tokens per weight group (batched prefill); the GEMV is the one-token tile.
//! F32: nibbles widened to f32 four at a time into FMAs.

use super::super::acts::Acts;
use super::{Rows, WORDS};
use crate::quant::{unpack_params, GROUP};
use std::arch::aarch64::*;

/// `acc + lo·xl + hi·xh` over 16 byte pairs each, into 4 i32 lanes of 4 consecutive bytes
/// (`Int8Sum`'s lanes): `smull`/`smlal` (two products per i16 lane: at most 2·15·128),
/// `addp` (four: at most 7,680), `sadalp`.
#[inline(always)]
unsafe fn dot16(
    acc: int32x4_t,
    lo: int8x16_t,
    xl: int8x16_t,
    hi: int8x16_t,
    xh: int8x16_t,
) -> int32x4_t {
    let p = vmlal_s8(
        vmull_s8(vget_low_s8(lo), vget_low_s8(xl)),
        vget_low_s8(hi),
        vget_low_s8(xh),
    );
    let p2 = vmlal_high_s8(vmull_high_s8(lo, xl), hi, xh);
    vpadalq_s16(acc, vpaddq_s16(p, p2))
}

/// The same sums by two `sdot` (four byte products into each i32 lane; FEAT_DotProd).
/// Written as assembly: the `vdotq_s32` intrinsic needs a newer Rust than the crate's
/// MSRV. (Inlined into the tile, which enables `dotprod` for the assembler.)
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(super) unsafe fn sdot16(
    acc: int32x4_t,
    lo: int8x16_t,
    xl: int8x16_t,
    hi: int8x16_t,
    xh: int8x16_t,
) -> int32x4_t {
    let mut acc = acc;
    core::arch::asm!(
        "sdot {acc:v}.4s, {lo:v}.16b, {xl:v}.16b",
        "sdot {acc:v}.4s, {hi:v}.16b, {xh:v}.16b",
        acc = inout(vreg) acc,
        lo = in(vreg) lo,
        xl = in(vreg) xl,
        hi = in(vreg) hi,
        xh = in(vreg) xh,
        options(pure, nomem, nostack, preserves_flags),
    );
    acc
}

/// `((acc0 + acc2) + (acc1 + acc3)) + mins`: `Int8Sum`'s finish.
#[inline(always)]
pub(super) unsafe fn finish4(acc: float32x4_t, mins: f32) -> f32 {
    let s = vadd_f32(vget_low_f32(acc), vget_high_f32(acc));
    (vget_lane_f32::<0>(s) + vget_lane_f32::<1>(s)) + mins
}

/// The int8 tile for one set of target features and 16-byte dot product (plain NEON and
/// dotprod differ only there).
macro_rules! int8_tile {
    ($(#[$doc:meta])* $name:ident, $features:literal, $dot:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub unsafe fn $name<const T: usize>(w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
            let Rows { codes, params, groups, rows, .. } = w;
            let mask = vdupq_n_u8(0x0F);
            let q: [*const i8; T] = core::array::from_fn(|t| acts[t].q.as_ptr());
            let ds: [*const [f32; 2]; T] = core::array::from_fn(|t| acts[t].ds.as_ptr());
            for r in 0..rows {
                let c = codes.as_ptr().add(r * groups * WORDS) as *const u8;
                let mut acc = [vdupq_n_f32(0.0); T];
                let mut mins = [0.0f32; T];
                for g in 0..groups {
                    let bytes = c.add(g * WORDS * 4);
                    let w = [vld1q_u8(bytes), vld1q_u8(bytes.add(16))];
                    let lo = w.map(|w| vreinterpretq_s8_u8(vandq_u8(w, mask)));
                    let hi = w.map(|w| vreinterpretq_s8_u8(vshrq_n_u8::<4>(w)));
                    let (scale, min) = unpack_params(*params.get_unchecked(r * groups + g));
                    for t in 0..T {
                        let x = q[t].add(g * GROUP);
                        let mut sums = vdupq_n_s32(0);
                        for half in 0..2 {
                            let xl = vld1q_s8(x.add(16 * half));
                            let xh = vld1q_s8(x.add(32 + 16 * half));
                            sums = $dot(sums, lo[half], xl, hi[half], xh);
                        }
                        let [d, block_sum] = *ds[t].add(g);
                        acc[t] = vaddq_f32(acc[t], vmulq_n_f32(vcvtq_f32_s32(sums), scale * d));
                        mins[t] += min * block_sum;
                    }
                }
                for t in 0..T {
                    out[r * stride + t] = finish4(acc[t], mins[t]);
                }
            }
        }
    };
}

int8_tile!(
    /// The int8 tile: `out[r·stride + t] ← row r · acts[t]` for `T` tokens, each weight
    /// group loaded, unpacked and its (scale, min) converted once for all `T` (`T = 1`:
    /// the GEMV).
    ///
    /// # Safety
    /// `w` must hold its rows, every `acts[t]` (`t < T`) `w.groups` int8 blocks, and `out`
    /// must reach `(rows − 1)·stride + T` (checked by `Kernel::tile` and `Kernel::rows`).
    /// NEON is part of every aarch64 CPU.
    tile_i8,
    "neon",
    dot16
);

int8_tile!(
    /// [`tile_i8`] with `sdot` dot products.
    ///
    /// # Safety
    /// As [`tile_i8`], on a CPU with FEAT_DotProd (`dotprod`).
    tile_i8_sdot,
    "neon,dotprod",
    sdot16
);

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
