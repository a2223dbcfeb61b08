//! The portable Q8 g32 kernels (layout: `packed.rs`): per block of 64, code byte `e` meets
//! activation entry `e`; entries `{0..16, 32..48}` belong to the block's first g32 group,
//! `{16..32, 48..64}` to its second. Int8: exact integer sums in [`Q8Sum`]'s eight lanes
//! (byte `b` of each 32-byte half to lane `b / 4`) and its epilogue, which every Q8 int8
//! kernel shares. Also what NEON and wasm run for Q8.

use super::super::acts::{Acts, HALF};
use super::{Q8Sum, Rows, LANES};
use crate::quant::GROUP;
use half::f16;

/// Code words per block.
const WORDS: usize = GROUP / 4;

/// The block's 64 codes (in entry order) and its two scales.
#[inline(always)]
fn block(w: &Rows, r: usize, g: usize) -> ([i8; GROUP], [f32; 2]) {
    let words = &w.codes[(r * w.groups + g) * WORDS..][..WORDS];
    let mut codes = [0i8; GROUP];
    for (four, word) in codes.chunks_exact_mut(4).zip(words) {
        for (c, b) in four.iter_mut().zip(word.to_le_bytes()) {
            *c = b as i8;
        }
    }
    let s = w.params[r * w.groups + g];
    let scale = |h: u32| f16::from_bits((s >> (16 * h)) as u16).to_f32();
    (codes, [scale(0), scale(1)])
}

/// # Panics
/// When `w` or `acts` hold fewer than `out.len()` rows or `w.groups` blocks.
pub fn rows_i8(w: Rows, acts: &Acts, out: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate() {
        let mut sum = Q8Sum::default();
        for g in 0..w.groups {
            let (codes, [s0, s1]) = block(&w, r, g);
            let q = &acts.q[g * GROUP..][..GROUP];
            let mut isum = [0i32; 2 * LANES];
            for (e, (&c, &q)) in codes.iter().zip(q).enumerate() {
                isum[e % HALF / 4] += i32::from(c) * i32::from(q);
            }
            let d = acts.ds[g][0];
            sum.add([s0 * d, s1 * d], isum);
        }
        *o = sum.finish();
    }
}

/// # Panics
/// As [`rows_i8`].
pub fn rows_f32(w: Rows, acts: &Acts, out: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        for g in 0..w.groups {
            let (codes, scales) = block(&w, r, g);
            let x = &acts.x[g * GROUP..][..GROUP];
            let mut fsum = [0.0f32; 2];
            for (e, (&c, &x)) in codes.iter().zip(x).enumerate() {
                fsum[e % HALF / 16] += f32::from(c) * x;
            }
            acc += scales[0] * fsum[0];
            acc += scales[1] * fsum[1];
        }
        *o = acc;
    }
}
