//! The fast backend's two matrix formats and their layouts, per row and per block of 64
//! elements along K (the activations' block, [`super::acts`]):
//!
//! - **Q4 g64** ([`Format::Q4`]): the package's layout as it is (`quant::Q4Tensor`): 8 code
//!   words and one (scale, min) word per block.
//! - **Q8 g32** ([`Format::Q8`]): `quant::Q8Tensor`'s values in a layout of the backend's
//!   own, made once at load: per block 16 code words whose 64 bytes are the block's codes
//!   in the activations' **nibble order** (entry `e` = element `element_of(e / 32, e % 32)`,
//!   so code byte `e` meets activation entry `e` without shuffles), and one word with the
//!   block's two f16 scales (low half: elements 0..32, high half: elements 32..64). In
//!   nibble order the first g32 group's elements are entries `{0..16, 32..48}`, the
//!   second's `{16..32, 48..64}`: a kernel sums the two entry sets apart and scales each
//!   with its own scale. Rows whose K is an odd multiple of 32 end with a half block of
//!   zero codes and a zero scale (the activations are zero-padded the same way).

use super::acts::{element_of, HALF};
use crate::error::{Error, Result};
use crate::quant::{dequantize_row_of, Q4Tensor, Q8Tensor, GROUP};
use half::f16;

/// How a matrix's codes and params are laid out (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Q4,
    Q8,
}

impl Format {
    /// Code words per block of 64 elements.
    pub const fn words(self) -> usize {
        match self {
            Format::Q4 => GROUP / 8,
            Format::Q8 => GROUP / 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Q4 => "q4 g64",
            Format::Q8 => "q8 g32",
        }
    }
}

/// A matrix in one of the kernels' layouts: `rows × cols`, `blocks()` blocks of 64 per row
/// (the last one half padded for a Q8 K of 32·odd), [`Format::words`] code words and one
/// param word per block.
#[derive(Clone, Debug, PartialEq)]
pub struct Packed {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    pub codes: Vec<u32>,
    pub params: Vec<u32>,
}

impl From<Q4Tensor> for Packed {
    /// A Q4 g64 tensor as it is (no copy).
    fn from(t: Q4Tensor) -> Packed {
        Packed {
            format: Format::Q4,
            rows: t.rows,
            cols: t.cols,
            codes: t.codes,
            params: t.qparams,
        }
    }
}

impl From<&Q8Tensor> for Packed {
    /// A Q8 g32 tensor's codes permuted into nibble order, its scales paired per block.
    fn from(t: &Q8Tensor) -> Packed {
        let (rows, cols) = (t.rows, t.cols);
        let blocks = cols.div_ceil(GROUP);
        let bytes = t.codes_bytes();
        let groups = cols / HALF;
        let mut codes = Vec::with_capacity(rows * blocks * GROUP / 4);
        let mut params = Vec::with_capacity(rows * blocks);
        for r in 0..rows {
            let row = &bytes[r * cols..][..cols];
            for b in 0..blocks {
                let code = |e: usize| {
                    let k = b * GROUP + element_of(e / HALF, e % HALF);
                    u32::from(row.get(k).copied().unwrap_or(0))
                };
                codes.extend(
                    (0..GROUP / 4)
                        .map(|w| (0..4).fold(0, |word, j| word | code(4 * w + j) << (8 * j))),
                );
                let scale = |g: usize| match g < groups {
                    true => u32::from(t.scale_bits(r * groups + g)),
                    false => 0,
                };
                params.push(scale(2 * b) | scale(2 * b + 1) << 16);
            }
        }
        Packed {
            format: Format::Q8,
            rows,
            cols,
            codes,
            params,
        }
    }
}

impl Packed {
    /// Blocks of 64 per row.
    pub fn blocks(&self) -> usize {
        self.cols.div_ceil(GROUP)
    }

    /// The rows of `parts` in order, as one matrix. Parts of one format stack as they
    /// are; a mix (a Keep model whose q, k and v came in different types) is stacked as
    /// Q8 g32, its Q4 parts requantized with ggml's Q8_0 rounding (from their Q4 values:
    /// within Q8's rounding of those, documented in docs/ARCHITECTURE.md).
    pub fn stack(parts: Vec<Packed>) -> Result<Packed> {
        let cols = parts[0].cols;
        let format = match parts.iter().all(|p| p.format == parts[0].format) {
            true => parts[0].format,
            false => Format::Q8,
        };
        let mut out = Packed {
            format,
            rows: 0,
            cols,
            codes: vec![],
            params: vec![],
        };
        for p in parts {
            if p.cols != cols {
                return Err(Error::InvalidArgument(format!(
                    "stacked matrices of {} and {cols} columns",
                    p.cols
                )));
            }
            let p = match p.format == format {
                true => p,
                false => Packed::from(&Q8Tensor::quantize(&p.dequantize(), p.rows, p.cols)?),
            };
            out.rows += p.rows;
            out.codes.extend_from_slice(&p.codes);
            out.params.extend_from_slice(&p.params);
        }
        Ok(out)
    }

    /// Every value, row-major.
    fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols).enumerate() {
            dequantize_row_in(self.format, (&self.codes, &self.params), self.cols, r, row);
        }
        out
    }
}

/// Row `row` of a matrix of `cols` columns in `format`, held in `(codes, params)`, into
/// `out` (`cols` values): the same values as `Q4Tensor::dequantize_row` /
/// `Q8Tensor::dequantize_row` (the same f32 operations).
pub fn dequantize_row_in(
    format: Format,
    (codes, params): (&[u32], &[u32]),
    cols: usize,
    row: usize,
    out: &mut [f32],
) {
    assert_eq!(out.len(), cols, "output length must equal cols");
    let blocks = cols.div_ceil(GROUP);
    let words = format.words();
    let (codes, params) = (
        &codes[row * blocks * words..][..blocks * words],
        &params[row * blocks..][..blocks],
    );
    match format {
        Format::Q4 => dequantize_row_of((codes, params), (1, cols), 0, out),
        Format::Q8 => {
            for (b, &scales) in params.iter().enumerate() {
                let scale = |e: usize| f16::from_bits((scales >> (16 * (e % HALF / 16))) as u16);
                for e in 0..GROUP {
                    let k = b * GROUP + element_of(e / HALF, e % HALF);
                    if k < cols {
                        let code = (codes[b * words + e / 4] >> (8 * (e % 4))) as u8 as i8;
                        out[k] = scale(e).to_f32() * f32::from(code);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::Rng;

    fn random_q8(rows: usize, cols: usize, seed: u64) -> Q8Tensor {
        let mut rng = Rng::new(seed);
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        Q8Tensor::quantize(&data, rows, cols).unwrap()
    }

    /// The permuted layout gives back every value of the tensor, for K a multiple of 64
    /// and an odd multiple of 32 (an odd group count, so the tensor's scale words straddle
    /// rows), and stacking keeps each part's rows.
    #[test]
    fn q8_rows_read_back_their_tensor_values() {
        for (rows, cols) in [(3, 64), (5, 96), (2, 32), (4, 896)] {
            let t = random_q8(rows, cols, cols as u64);
            let p = Packed::from(&t);
            assert_eq!(p.codes.len(), rows * p.blocks() * 16);
            let (mut got, mut want) = (vec![0.0; cols], vec![0.0; cols]);
            for r in 0..rows {
                dequantize_row_in(Format::Q8, (&p.codes, &p.params), cols, r, &mut got);
                t.dequantize_row(r, &mut want);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{rows}×{cols} row {r}");
            }
            let stacked = Packed::stack(vec![p.clone(), p.clone()]).unwrap();
            assert_eq!((stacked.rows, stacked.format), (2 * rows, Format::Q8));
            assert_eq!(stacked.dequantize()[rows * cols..], p.dequantize()[..]);
        }
    }

    /// A mixed stack is Q8 g32, its Q4 part's values within Q8 rounding of them.
    #[test]
    fn a_mixed_stack_requantizes_its_q4_parts_to_q8() {
        let data: Vec<f32> = (0..2 * 128)
            .map(|i| ((i * 37 % 19) as f32 - 9.0) / 10.0)
            .collect();
        let q4 = Q4Tensor::quantize(&data, 2, 128).unwrap();
        let q4_values = q4.dequantize();
        let q8 = Packed::from(&random_q8(3, 128, 1));
        let stacked = Packed::stack(vec![q8.clone(), Packed::from(q4)]).unwrap();
        assert_eq!((stacked.rows, stacked.format), (5, Format::Q8));
        let values = stacked.dequantize();
        assert_eq!(values[..3 * 128], q8.dequantize()[..]);
        for (got, want) in values[3 * 128..].iter().zip(&q4_values) {
            assert!((got - want).abs() <= 1.0 / 254.0, "{got} vs {want}");
        }
    }
}
