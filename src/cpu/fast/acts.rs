//! Matrix inputs prepared for the kernels, in one of two precisions ([`Precision`]):
//!
//! - `Int8`: quantized per block of 64 (the weights' group) for int8 dot products. Block
//!   `g` becomes 64 signed bytes `q` with one scale `d = max|x| / 127`, so `x_i ≈ d · q_i`
//!   with `|x_i − d · q_i| ≤ d / 2`.
//! - `F32`: kept exact (the oracle's numbers, only summed in another order).
//!
//! Either way the exact f32 sum of each block is kept: a Q4 g64 weight is
//! `scale · code + min`, so
//!
//! ```text
//! Σ_i w_i x_i = scale · Σ_i code_i x_i + min · sum   (≈ scale · d · Σ_i code_i q_i + min · sum)
//! ```
//!
//! and the `min` term carries no activation rounding at all.
//!
//! The elements of a block are stored in the order of the weight nibbles they meet: byte
//! `b` (0..32) of a group's 32 code bytes holds element `8·(b/4) + b%4` in its low nibble
//! and that element + 4 in its high nibble (see `quant.rs`), so entry `b` is the former
//! and entry `32 + b` the latter. Then a kernel multiplies the low nibbles of a 32-byte
//! load with entries `0..32` and the high nibbles with `32..64`, without any shuffles.

use crate::cpu::ops::round_half_even;
use crate::quant::GROUP;

/// Bytes per half block: the low-nibble half, then the high-nibble half.
pub const HALF: usize = GROUP / 2;

/// How matrix inputs are held (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// Per-block int8: the fastest (what llama.cpp does for Q4_1 × Q8_1).
    #[default]
    Int8,
    /// f32: the oracle's numbers exactly, about half the speed.
    F32,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::Int8 => "int8",
            Precision::F32 => "f32",
        }
    }
}

/// A vector prepared for the kernels (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Acts {
    pub precision: Precision,
    /// Int8: `blocks · 64` bytes, each block in nibble order (empty for F32).
    pub q: Vec<i8>,
    /// F32: `blocks · 64` values, each block in nibble order (empty for Int8).
    pub x: Vec<f32>,
    /// `[d, sum]` per block (`d` = 1 for F32).
    pub ds: Vec<[f32; 2]>,
}

/// The element of a block that entry `b` of the nibble-ordered half `half` (0 low, 1 high)
/// stands for.
pub const fn element_of(half: usize, b: usize) -> usize {
    8 * (b / 4) + b % 4 + 4 * half
}

impl Acts {
    /// Prepare `x` in `precision` (see [`Acts::set`]).
    pub fn new(precision: Precision, x: &[f32]) -> Acts {
        let mut a = Acts {
            precision,
            ..Acts::default()
        };
        a.set(x);
        a
    }

    /// Prepare `x` into `self` (same precision), reusing its memory. A length that is
    /// not a multiple of 64 (a Q8 g32 matrix's K of 32·odd) ends in a zero-padded block.
    pub fn set(&mut self, x: &[f32]) {
        let blocks = x.len().div_ceil(GROUP);
        self.ds.resize(blocks, [0.0; 2]);
        match self.precision {
            Precision::Int8 => self.q.resize(blocks * GROUP, 0),
            Precision::F32 => self.x.resize(blocks * GROUP, 0.0),
        }
        let mut padded = [0.0f32; GROUP];
        for (g, block) in x.chunks(GROUP).enumerate() {
            let block = match block.len() {
                GROUP => block,
                n => {
                    padded[..n].copy_from_slice(block);
                    &padded[..]
                }
            };
            let d = match self.precision {
                Precision::Int8 => quantize_block(block, &mut self.q[g * GROUP..][..GROUP]),
                Precision::F32 => {
                    let out = &mut self.x[g * GROUP..][..GROUP];
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = block[element_of(i / HALF, i % HALF)];
                    }
                    1.0
                }
            };
            self.ds[g] = [d, block.iter().sum()];
        }
    }

    /// Blocks held.
    pub fn blocks(&self) -> usize {
        self.ds.len()
    }

    /// The value block element `i` stands for: `d · q`, or `x` itself for F32 (for error
    /// bounds in tests).
    pub fn value(&self, i: usize) -> f32 {
        let (g, e) = (i / GROUP, i % GROUP);
        let entry = g * GROUP + (e % 8 / 4) * HALF + e % 4 + 4 * (e / 8);
        match self.precision {
            Precision::Int8 => self.ds[g][0] * f32::from(self.q[entry]),
            Precision::F32 => self.x[entry],
        }
    }
}

/// Quantize one block into nibble-ordered bytes; returns its scale `d`. Elements
/// `8k..8k + 4` go to entries `4k..` of the low half, `8k + 4..8k + 8` to the high half's
/// (`element_of`), four at a time so the loop vectorizes (rounding included:
/// [`round_half_even`]).
fn quantize_block(block: &[f32], q: &mut [i8]) -> f32 {
    let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
    let (lo, hi) = q.split_at_mut(HALF);
    for (k, x) in block.chunks_exact(8).enumerate() {
        for j in 0..4 {
            // |v · inv| ≤ 127 (up to rounding), so the cast never saturates wrongly.
            lo[4 * k + j] = round_half_even(x[j] * inv) as i8;
            hi[4 * k + j] = round_half_even(x[4 + j] * inv) as i8;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_is_within_half_a_step_and_sums_are_exact() {
        let x: Vec<f32> = (0..128)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
            .collect();
        let a = Acts::new(Precision::Int8, &x);
        assert_eq!(a.blocks(), 2);
        for (i, &v) in x.iter().enumerate() {
            let d = a.ds[i / GROUP][0];
            assert!((a.value(i) - v).abs() <= d * 0.5 + 1e-7, "element {i}");
        }
        assert_eq!(a.ds[1][1], x[64..].iter().sum::<f32>());
    }

    #[test]
    fn nibble_order_puts_low_then_high_nibble_elements() {
        // byte b of a word-group: elements 8(b/4)+b%4 (low) and +4 (high).
        assert_eq!(element_of(0, 0), 0);
        assert_eq!(element_of(0, 5), 9);
        assert_eq!(element_of(1, 5), 13);
        assert_eq!(element_of(1, 31), 63);
        let mut x = vec![0.0f32; 64];
        x[13] = 1.0;
        let a = Acts::new(Precision::Int8, &x);
        assert_eq!(a.q[HALF + 5], 127);
        assert_eq!(a.value(13), 1.0);
    }

    #[test]
    fn f32_keeps_every_value_exactly() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32).sin()).collect();
        let a = Acts::new(Precision::F32, &x);
        assert!((0..64).all(|i| a.value(i) == x[i]) && a.ds[0][0] == 1.0);
    }

    #[test]
    fn a_zero_block_quantizes_to_zeros() {
        let a = Acts::new(Precision::Int8, &[0.0; 64]);
        assert!(a.q.iter().all(|&q| q == 0) && a.ds[0] == [0.0, 0.0]);
    }
}
