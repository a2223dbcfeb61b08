//! NEON kernels: one group (64 weights, 32 code bytes) per iteration, as two 16-byte
//! halves. Int8: nibbles (0..=15, so also valid i8) times activation bytes in
//! `smull`/`smlal2` (two products per i16 lane: at most 2·15·128), pairwise-widened into
//! i32 lanes with `sadalp`; with FEAT_DotProd one `sdot` (four products into each i32
//! lane) replaces the three. The lanes are summed (`addv`) into the group's exact integer
//! sum, which the shared epilogue ([`Int8Sum`]) scales in the scalar kernel's order. Up to
//! `TILE` tokens per weight group (batched prefill); the GEMV is the one-token tile.
//! F32: nibbles widened to f32 four at a time into FMAs.

use super::super::acts::Acts;
use super::{Int8Sum, Rows, WORDS};
use crate::quant::{unpack_params, GROUP};
use std::arch::aarch64::*;

/// `acc + Σ a·b` over 16 byte pairs, widened into 4 i32 lanes.
#[inline(always)]
unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    vpadalq_s16(acc, vmlal_high_s8(p, a, b))
}

/// The same sums by one `sdot` (four byte products into each i32 lane; FEAT_DotProd).
/// Written as assembly: the `vdotq_s32` intrinsic needs a newer Rust than the crate's
/// MSRV. (Inlined into the tile, which enables `dotprod` for the assembler.)
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn sdot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    core::arch::asm!(
        "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        options(pure, nomem, nostack, preserves_flags),
    );
    acc
}

/// The int8 tile for one set of target features and 16-byte dot product (plain NEON and
/// dotprod differ only there).
macro_rules! int8_tile {
    ($(#[$doc:meta])* $name:ident, $features:literal, $dot:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub unsafe fn $name<const T: usize>(w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
            let Rows { codes, params, groups, rows } = w;
            let mask = vdupq_n_u8(0x0F);
            let q: [*const i8; T] = core::array::from_fn(|t| acts[t].q.as_ptr());
            let ds: [*const [f32; 2]; T] = core::array::from_fn(|t| acts[t].ds.as_ptr());
            for r in 0..rows {
                let c = codes.as_ptr().add(r * groups * WORDS) as *const u8;
                let mut sum = [Int8Sum::default(); T];
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
                            sums = $dot(sums, lo[half], vld1q_s8(x.add(16 * half)));
                            sums = $dot(sums, hi[half], vld1q_s8(x.add(32 + 16 * half)));
                        }
                        let [d, block_sum] = *ds[t].add(g);
                        sum[t].add(scale * d, vaddvq_s32(sums), min * block_sum);
                    }
                }
                for t in 0..T {
                    out[r * stride + t] = sum[t].finish();
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
