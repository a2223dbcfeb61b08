//! wasm `simd128` kernels (compiled in with `-C target-feature=+simd128`, which the web
//! build sets): one group (64 weights, 32 code bytes) per iteration, as two 16-byte halves
//! like the NEON kernels. Int8: nibbles (0..=15, so also valid i8) times activation bytes
//! in `i16x8.extmul_{low,high}_i8x16`, summed into `Int8Sum`'s four i32 lanes (see
//! [`dot_extmul`]) and scaled in its order (a multiply, then an add), so the results equal
//! the scalar kernel's bit for bit. The build with the feature `wasm-relaxed-simd` (loaded where the
//! browser has relaxed SIMD) also has a tile on `i32x4.relaxed_dot_i8x16_i7x16_add_s` ([`tile_i8_relaxed`]). F32: nibbles widened to f32 four at a time (there
//! is no fused multiply-add in simd128: multiply, then add).
//!
//! The int8 GEMV is the one-token case of the int8 tile (up to `TILE` tokens per weight
//! group, for batched prefill).
//!
//! The (scale, min) f16 pair is unpacked by [`super::f16_bits_to_f32`]: the `half`
//! crate's portable conversion is a branchy routine that would cost more than the group's
//! arithmetic.

use super::super::acts::Acts;
use super::{f16_bits_to_f32 as f16_to_f32, Rows, WORDS};
use crate::quant::GROUP;
use core::arch::wasm32::*;

/// A params word's (scale, min).
#[inline(always)]
fn unpack(word: u32) -> (f32, f32) {
    (f16_to_f32(word & 0xFFFF), f16_to_f32(word >> 16))
}

/// The sum of the four lanes.
#[inline(always)]
fn hsum(v: v128) -> f32 {
    f32x4_extract_lane::<0>(v)
        + f32x4_extract_lane::<1>(v)
        + f32x4_extract_lane::<2>(v)
        + f32x4_extract_lane::<3>(v)
}

/// `((a0 + a2) + (a1 + a3)) + mins`: `Int8Sum`'s finish.
#[inline(always)]
pub(super) fn finish4(acc: v128, mins: f32) -> f32 {
    let (a0, a1) = (f32x4_extract_lane::<0>(acc), f32x4_extract_lane::<1>(acc));
    let (a2, a3) = (f32x4_extract_lane::<2>(acc), f32x4_extract_lane::<3>(acc));
    ((a0 + a2) + (a1 + a3)) + mins
}

/// A group's `Σ code·q` in `Int8Sum`'s 4 lanes (4 consecutive bytes of each 16-byte half)
/// with `i16x8.extmul`: the nibble halves `lo` / `hi` meet the 64 bytes at `x`. Products
/// of bytes `i` and `i + 16` share an i16 lane (four products: at most 7,680), widened
/// pairwise to i32 and regrouped by two shuffles.
#[inline(always)]
unsafe fn dot_extmul(lo: &[v128; 2], hi: &[v128; 2], x: *const i8) -> v128 {
    let (mut low, mut high) = (i16x8_splat(0), i16x8_splat(0));
    for half in 0..2 {
        let xl = v128_load(x.add(16 * half) as *const v128);
        let xh = v128_load(x.add(32 + 16 * half) as *const v128);
        let (l, h) = (lo[half], hi[half]);
        low = i16x8_add(low, i16x8_extmul_low_i8x16(l, xl));
        low = i16x8_add(low, i16x8_extmul_low_i8x16(h, xh));
        high = i16x8_add(high, i16x8_extmul_high_i8x16(l, xl));
        high = i16x8_add(high, i16x8_extmul_high_i8x16(h, xh));
    }
    // Pairs of bytes (0,1) (2,3) (4,5) (6,7), then (8,9) .. (14,15).
    let (a, b) = (
        i32x4_extadd_pairwise_i16x8(low),
        i32x4_extadd_pairwise_i16x8(high),
    );
    i32x4_add(
        i32x4_shuffle::<0, 2, 4, 6>(a, b),
        i32x4_shuffle::<1, 3, 5, 7>(a, b),
    )
}

/// A group's `Σ code·q` with relaxed SIMD's `i32x4.relaxed_dot_i8x16_i7x16_add_s`: four byte
/// products summed into each i32 lane. Its second operand is the "i7" one (read as signed
/// or unsigned, and its pair sums may saturate in i16, as the engine likes): the nibbles
/// (0..=15) go there, so both readings agree, and a pair sums to at most 2·15·128, far
/// from saturating; the activations (any i8) are the first operand. The result is exact
/// on every engine.
#[cfg(feature = "wasm-relaxed-simd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
unsafe fn dot_relaxed(lo: &[v128; 2], hi: &[v128; 2], x: *const i8) -> v128 {
    let mut sums = i32x4_splat(0);
    for half in 0..2 {
        let xl = v128_load(x.add(16 * half) as *const v128);
        let xh = v128_load(x.add(32 + 16 * half) as *const v128);
        sums = i32x4_relaxed_dot_i8x16_i7x16_add(xl, lo[half], sums);
        sums = i32x4_relaxed_dot_i8x16_i7x16_add(xh, hi[half], sums);
    }
    sums
}

/// The int8 tile with the group dot product `dot`: `out[r·stride + t] ← row r · acts[t]`
/// for `T` tokens, each weight group loaded, unpacked and its (scale, min) converted once
/// for all `T` (`T = 1`: the GEMV).
#[inline(always)]
unsafe fn tile<const T: usize>(
    w: Rows,
    acts: &[Acts],
    out: &mut [f32],
    stride: usize,
    dot: impl Fn(&[v128; 2], &[v128; 2], *const i8) -> v128,
) {
    let Rows {
        codes,
        params,
        groups,
        rows,
        ..
    } = w;
    let mask = u8x16_splat(0x0F);
    let q: [*const i8; T] = core::array::from_fn(|t| acts[t].q.as_ptr());
    let ds: [*const [f32; 2]; T] = core::array::from_fn(|t| acts[t].ds.as_ptr());
    for r in 0..rows {
        let c = codes.as_ptr().add(r * groups * WORDS) as *const u8;
        let mut acc = [f32x4_splat(0.0); T];
        let mut mins = [0.0f32; T];
        for g in 0..groups {
            let bytes = c.add(g * WORDS * 4);
            let w = [0, 1].map(|half| v128_load(bytes.add(16 * half) as *const v128));
            let lo = w.map(|w| v128_and(w, mask));
            let hi = w.map(|w| u8x16_shr(w, 4));
            let (scale, min) = unpack(*params.get_unchecked(r * groups + g));
            for t in 0..T {
                let [d, block_sum] = *ds[t].add(g);
                let sums = f32x4_convert_i32x4(dot(&lo, &hi, q[t].add(g * GROUP)));
                acc[t] = f32x4_add(acc[t], f32x4_mul(sums, f32x4_splat(scale * d)));
                mins[t] += min * block_sum;
            }
        }
        for t in 0..T {
            out[r * stride + t] = finish4(acc[t], mins[t]);
        }
    }
}

/// The simd128 int8 tile ([`tile`] with `i16x8.extmul`).
///
/// # Safety
/// `w` must hold its rows, every `acts[t]` (`t < T`) `w.groups` int8 blocks, and `out`
/// must reach `(rows − 1)·stride + T` (checked by `Kernel::tile` and `Kernel::rows`).
/// `simd128` is a compile-time feature: no run-time check is needed.
pub unsafe fn tile_i8<const T: usize>(w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
    tile::<T>(w, acts, out, stride, |lo, hi, x| dot_extmul(lo, hi, x))
}

/// The relaxed-SIMD int8 tile ([`tile`] with `relaxed_dot`), in the build with the cargo
/// feature `wasm-relaxed-simd`: only these functions are compiled with `relaxed-simd` (the
/// tile and its closure inline into this one), so that build shares every dependency's
/// (and std's) objects with the plain simd128 build and recompiles only this crate.
///
/// # Safety
/// As [`tile_i8`]; the browser must validate relaxed SIMD (web/src/simd.js loads this
/// build only where it does).
#[cfg(feature = "wasm-relaxed-simd")]
#[target_feature(enable = "relaxed-simd")]
pub unsafe fn tile_i8_relaxed<const T: usize>(
    w: Rows,
    acts: &[Acts],
    out: &mut [f32],
    stride: usize,
) {
    tile::<T>(w, acts, out, stride, |lo, hi, x| dot_relaxed(lo, hi, x))
}

/// `acc + Σ nibble·x` over the 16 nibbles of `v` and `x[0..16]`.
#[inline(always)]
unsafe fn fma16(acc: v128, v: v128, x: *const f32) -> v128 {
    let (l, h) = (u16x8_extend_low_u8x16(v), u16x8_extend_high_u8x16(v));
    let f = |w: v128| f32x4_convert_u32x4(w);
    let xs = |i: usize| v128_load(x.add(4 * i) as *const v128);
    let acc = f32x4_add(acc, f32x4_mul(f(u32x4_extend_low_u16x8(l)), xs(0)));
    let acc = f32x4_add(acc, f32x4_mul(f(u32x4_extend_high_u16x8(l)), xs(1)));
    let acc = f32x4_add(acc, f32x4_mul(f(u32x4_extend_low_u16x8(h)), xs(2)));
    f32x4_add(acc, f32x4_mul(f(u32x4_extend_high_u16x8(h)), xs(3)))
}

/// # Safety
/// `codes`, `params` and `acts` must hold `out.len()` rows of `groups` groups (checked by
/// `Kernel::rows`). `simd128` is a compile-time feature: no run-time check is needed.
pub unsafe fn rows_f32(codes: &[u32], params: &[u32], groups: usize, acts: &Acts, out: &mut [f32]) {
    let mask = u8x16_splat(0x0F);
    let x = acts.x.as_ptr();
    for (r, o) in out.iter_mut().enumerate() {
        let c = codes.as_ptr().add(r * groups * WORDS) as *const u8;
        let mut acc = f32x4_splat(0.0);
        let mut mins = 0.0f32;
        for g in 0..groups {
            let bytes = c.add(g * WORDS * 4);
            let xg = x.add(g * GROUP);
            let mut s = f32x4_splat(0.0);
            for half in 0..2 {
                let w = v128_load(bytes.add(16 * half) as *const v128);
                s = fma16(s, v128_and(w, mask), xg.add(16 * half));
                s = fma16(s, u8x16_shr(w, 4), xg.add(32 + 16 * half));
            }
            let (scale, min) = unpack(*params.get_unchecked(r * groups + g));
            acc = f32x4_add(acc, f32x4_mul(s, f32x4_splat(scale)));
            mins += min * acts.ds.get_unchecked(g)[1];
        }
        *o = hsum(acc) + mins;
    }
}
