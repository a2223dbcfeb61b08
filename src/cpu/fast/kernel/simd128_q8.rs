//! wasm `simd128` int8 tile for Q8 g32 (layout: `packed.rs`): one block of 64 codes (four
//! 16-byte loads, in the activations' nibble order) per iteration. The codes are signed,
//! so each 16 bytes of codes and activations are widened to i16 and multiplied pairwise by
//! `i32x4.dot_i16x8_s` (exact: at most 2·128·127 per lane), then regrouped by two shuffles
//! into [`super::Q8Sum`]'s lanes: lane `l` holds bytes `4l..4l + 4` of both 32-byte halves
//! of the block, lanes 0..4 its first g32 group and 4..8 its second, each scaled by its own
//! scale in `Q8Sum`'s order (a multiply, then an add: simd128 has no fused multiply-add),
//! so the results equal the scalar kernel's bit for bit. The relaxed-SIMD build runs this
//! tile too (`i32x4.relaxed_dot_i8x16_i7x16` needs one operand in 0..=127). F32 runs the
//! scalar Q8 kernel.

use super::super::acts::Acts;
use super::simd128::finish4;
use super::{f16_bits_to_f32 as f16_to_f32, Rows};
use crate::quant::GROUP;
use core::arch::wasm32::*;

/// Code words per block.
const WORDS: usize = GROUP / 4;

/// `Σ w·x` over 16 signed bytes, per four consecutive bytes: lanes
/// `[0..4, 4..8, 8..12, 12..16]`.
#[inline(always)]
fn dot16(w: v128, x: v128) -> v128 {
    // Pairs (0,1) (2,3) (4,5) (6,7), then (8,9) .. (14,15).
    let low = i32x4_dot_i16x8(i16x8_extend_low_i8x16(w), i16x8_extend_low_i8x16(x));
    let high = i32x4_dot_i16x8(i16x8_extend_high_i8x16(w), i16x8_extend_high_i8x16(x));
    i32x4_add(
        i32x4_shuffle::<0, 2, 4, 6>(low, high),
        i32x4_shuffle::<1, 3, 5, 7>(low, high),
    )
}

/// The simd128 Q8 int8 tile: `out[r·stride + t] ← row r · acts[t]` for `T` tokens, each
/// block's codes loaded and its scales converted once for all `T` (`T = 1`: the GEMV).
///
/// # Safety
/// `w` must hold its rows, every `acts[t]` (`t < T`) `w.groups` int8 blocks, and `out`
/// must reach `(rows − 1)·stride + T` (checked by `Kernel::tile` and `Kernel::rows`).
/// `simd128` is a compile-time feature: no run-time check is needed.
pub unsafe fn tile_i8<const T: usize>(w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
    let Rows {
        codes,
        params,
        groups,
        rows,
        ..
    } = w;
    let q: [*const i8; T] = core::array::from_fn(|t| acts[t].q.as_ptr());
    let ds: [*const [f32; 2]; T] = core::array::from_fn(|t| acts[t].ds.as_ptr());
    for r in 0..rows {
        let c = codes.as_ptr().add(r * groups * WORDS) as *const u8;
        // Per token: the first group's lanes (0..4) and the second's (4..8).
        let mut acc = [[f32x4_splat(0.0); 2]; T];
        for g in 0..groups {
            let bytes = c.add(g * WORDS * 4);
            let codes: [v128; 4] =
                core::array::from_fn(|i| v128_load(bytes.add(16 * i) as *const v128));
            let s = *params.get_unchecked(r * groups + g);
            let scales = [f16_to_f32(s & 0xFFFF), f16_to_f32(s >> 16)];
            for t in 0..T {
                let x = q[t].add(g * GROUP);
                let xs: [v128; 4] =
                    core::array::from_fn(|i| v128_load(x.add(16 * i) as *const v128));
                let d = (*ds[t].add(g))[0];
                // Bytes 0..16 and 32..48 are the first group's; 16..32 and 48..64 the second's.
                for (h, a) in acc[t].iter_mut().enumerate() {
                    let sums = i32x4_add(dot16(codes[h], xs[h]), dot16(codes[h + 2], xs[h + 2]));
                    let sd = f32x4_splat(scales[h] * d);
                    *a = f32x4_add(*a, f32x4_mul(f32x4_convert_i32x4(sums), sd));
                }
            }
        }
        for t in 0..T {
            let [a, b] = acc[t];
            out[r * stride + t] = finish4(f32x4_add(a, b), 0.0);
        }
    }
}
