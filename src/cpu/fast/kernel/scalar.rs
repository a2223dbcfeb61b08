//! The portable kernels: per group, `Σ code·q` (exact integer sums) or `Σ code·x` over
//! the 32 code bytes (low nibble with entry `b`, high nibble with entry `32 + b`), then
//! the f32 epilogue (for int8 [`Int8Sum`]'s lanes and order, which every int8 kernel shares).

use super::super::acts::{Acts, HALF};
use super::{lane_of, Int8Sum, LANES, WORDS};
use crate::quant::{unpack_params, GROUP};

/// Call `f(byte_index, low_nibble, high_nibble)` for the 32 code bytes of a group.
#[inline(always)]
fn for_each_byte(words: &[u32], mut f: impl FnMut(usize, u8, u8)) {
    for (w, &word) in words.iter().enumerate() {
        for j in 0..4 {
            let byte = (word >> (8 * j)) as u8;
            f(4 * w + j, byte & 0xF, byte >> 4);
        }
    }
}

pub fn rows_i8(codes: &[u32], params: &[u32], groups: usize, acts: &Acts, out: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate() {
        let mut sum = Int8Sum::default();
        for g in 0..groups {
            let words = &codes[(r * groups + g) * WORDS..][..WORDS];
            let q = &acts.q[g * GROUP..][..GROUP];
            let mut isum = [0i32; LANES];
            for_each_byte(words, |b, lo, hi| {
                isum[lane_of(b)] +=
                    i32::from(lo) * i32::from(q[b]) + i32::from(hi) * i32::from(q[HALF + b]);
            });
            let (scale, min) = unpack_params(params[r * groups + g]);
            let [d, block_sum] = acts.ds[g];
            sum.add(scale * d, isum, min * block_sum);
        }
        *o = sum.finish();
    }
}

pub fn rows_f32(codes: &[u32], params: &[u32], groups: usize, acts: &Acts, out: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        let mut mins = 0.0f32;
        for g in 0..groups {
            let words = &codes[(r * groups + g) * WORDS..][..WORDS];
            let x = &acts.x[g * GROUP..][..GROUP];
            let mut fsum = 0.0f32;
            for_each_byte(words, |b, lo, hi| {
                fsum += f32::from(lo) * x[b] + f32::from(hi) * x[HALF + b];
            });
            let (scale, min) = unpack_params(params[r * groups + g]);
            acc += scale * fsum;
            mins += min * acts.ds[g][1];
        }
        *o = acc + mins;
    }
}
