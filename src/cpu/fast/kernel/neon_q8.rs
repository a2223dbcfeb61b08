//! NEON int8 tiles for Q8 g32 (layout: `packed.rs`): one block of 64 codes (four 16-byte
//! loads, in the activations' nibble order) per iteration. Bytes 0..16 and 32..48 are the
//! block's first g32 group, 16..32 and 48..64 its second; each group's two 16-byte dot
//! products land in four i32 lanes of four consecutive bytes ([`super::Q8Sum`]'s lanes:
//! the first group's in lanes 0..4, the second's in 4..8), by `smull` + `saddlp`/`sadalp` +
//! `addp` (every step exact: a product fits i16), or by two FEAT_DotProd `sdot`. Each group
//! is scaled by its own scale in `Q8Sum`'s order (a multiply, then an add), so the results
//! equal the scalar kernel's bit for bit. F32 runs the scalar Q8 kernel.

use super::super::acts::Acts;
use super::neon::{finish4, sdot16};
use super::{f16_bits_to_f32, Rows};
use crate::quant::GROUP;
use std::arch::aarch64::*;

/// Code words per block.
const WORDS: usize = GROUP / 4;

/// `acc + a·xa + b·xb` over 16 signed byte pairs each, into 4 i32 lanes of 4 consecutive
/// bytes: products in i16 (at most 128², exact), pairs widened to i32 (`saddlp`,
/// `sadalp`), then pairs of pairs (`addp`).
#[inline(always)]
unsafe fn dot16(
    acc: int32x4_t,
    a: int8x16_t,
    xa: int8x16_t,
    b: int8x16_t,
    xb: int8x16_t,
) -> int32x4_t {
    let low = vpadalq_s16(
        vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(xa))),
        vmull_s8(vget_low_s8(b), vget_low_s8(xb)),
    );
    let high = vpadalq_s16(vpaddlq_s16(vmull_high_s8(a, xa)), vmull_high_s8(b, xb));
    vaddq_s32(acc, vpaddq_s32(low, high))
}

/// The Q8 int8 tile for one set of target features and 16-byte dot product.
macro_rules! q8_tile {
    ($(#[$doc:meta])* $name:ident, $features:literal, $dot:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub unsafe fn $name<const T: usize>(w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
            let Rows { codes, params, groups, rows, .. } = w;
            let q: [*const i8; T] = core::array::from_fn(|t| acts[t].q.as_ptr());
            let ds: [*const [f32; 2]; T] = core::array::from_fn(|t| acts[t].ds.as_ptr());
            for r in 0..rows {
                let c = codes.as_ptr().add(r * groups * WORDS) as *const i8;
                // Per token: the first group's lanes (0..4) and the second's (4..8).
                let mut acc = [[vdupq_n_f32(0.0); 2]; T];
                for g in 0..groups {
                    let bytes = c.add(g * GROUP);
                    let codes: [int8x16_t; 4] = core::array::from_fn(|i| vld1q_s8(bytes.add(16 * i)));
                    let s = *params.get_unchecked(r * groups + g);
                    let scales = [f16_bits_to_f32(s & 0xFFFF), f16_bits_to_f32(s >> 16)];
                    for t in 0..T {
                        let x = q[t].add(g * GROUP);
                        let xs: [int8x16_t; 4] = core::array::from_fn(|i| vld1q_s8(x.add(16 * i)));
                        let d = (*ds[t].add(g))[0];
                        for (h, a) in acc[t].iter_mut().enumerate() {
                            let sums = $dot(vdupq_n_s32(0), codes[h], xs[h], codes[h + 2], xs[h + 2]);
                            *a = vaddq_f32(*a, vmulq_n_f32(vcvtq_f32_s32(sums), scales[h] * d));
                        }
                    }
                }
                for t in 0..T {
                    let [a, b] = acc[t];
                    out[r * stride + t] = finish4(vaddq_f32(a, b), 0.0);
                }
            }
        }
    };
}

q8_tile!(
    /// The NEON Q8 int8 tile: `out[r·stride + t] ← row r · acts[t]` for `T` tokens, each
    /// block's codes loaded and its scales converted once for all `T` (`T = 1`: the GEMV).
    ///
    /// # Safety
    /// `w` must hold its rows, every `acts[t]` (`t < T`) `w.groups` int8 blocks, and `out`
    /// must reach `(rows − 1)·stride + T` (checked by `Kernel::tile` and `Kernel::rows`).
    /// NEON is part of every aarch64 CPU.
    tile_i8,
    "neon",
    dot16
);

q8_tile!(
    /// [`tile_i8`] with `sdot` dot products.
    ///
    /// # Safety
    /// As [`tile_i8`], on a CPU with FEAT_DotProd (`dotprod`).
    tile_i8_sdot,
    "neon,dotprod",
    sdot16
);
