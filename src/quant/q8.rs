//! Q8 g32: symmetric int8 weights, group 32 along K, one f16 scale per group — the values
//! of ggml's Q8_0, so a Q8_0 tensor is kept bit-exactly (and so is Q5_0 and Q4_0, whose
//! codes are small integers under the same one-scale-per-32 form).
//!
//! `w = scale · code`, code in -128..=127. Codes: u32[N][K/4]; byte j of a word is element
//! j (two's complement), so a word is 4 consecutive K values. Scales: the groups' f16
//! scales in order, two per u32 (even group in the low half), the last word zero-padded
//! when the group count is odd. Groups are the consecutive 32-element chunks of the
//! flattened row-major data (K is a multiple of 32), as for Q4 g64.

use super::{
    checked_group_elems, dequantize_rows, ggml_row_bytes, words_from_le, MergeStats,
    CONVERT_CHUNK_ELEMS,
};
use crate::error::{Error, Result};
use crate::format::gguf::GgmlType;
use crate::format::gguf_dequant;
use half::f16;

/// Elements per Q8 group (one f16 scale each).
pub const Q8_GROUP: usize = 32;

/// A Q8 g32 matrix of `rows × cols` (cols = K, a multiple of 32).
#[derive(Clone, Debug, PartialEq)]
pub struct Q8Tensor {
    pub rows: usize,
    pub cols: usize,
    /// `rows * cols / 4` words, four int8 codes each.
    pub codes: Vec<u32>,
    /// `ceil(rows * cols / 32 / 2)` words, two f16 scales each.
    pub scales: Vec<u32>,
}

/// Checked `rows * cols`, with `cols` a multiple of the group size.
fn checked_elems(rows: usize, cols: usize) -> Result<usize> {
    checked_group_elems("Q8 g32", Q8_GROUP, rows, cols)
}

/// Scale words for `groups` groups.
fn scale_words(groups: usize) -> usize {
    groups.div_ceil(2)
}

/// Quantize one group as ggml's `quantize_row_q8_0_ref` does: `d = amax / 127` (stored as
/// f16), codes `round(v / d)` with the unrounded `d`. Returns the scale's f16 bits.
fn quantize_group(vals: &[f32], codes: &mut [i8]) -> Result<u16> {
    let mut amax = 0f32;
    for &v in vals {
        if !v.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "cannot quantize a non-finite value ({v})"
            )));
        }
        amax = amax.max(v.abs());
    }
    let d = amax / 127.0;
    let d_h = f16::from_f32(d);
    if !d_h.is_finite() {
        return Err(Error::InvalidArgument(format!(
            "a group reaches {amax}, beyond what an f16 scale can hold (|v| ≤ 127·65504)"
        )));
    }
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (c, &v) in codes.iter_mut().zip(vals) {
        *c = (v * id).round().clamp(-127.0, 127.0) as i8;
    }
    Ok(d_h.to_bits())
}

/// Keep one group exactly under the f16 scale `d` when every value is `code · d` for an
/// int8 code (the dequantized values of Q8_0, Q5_0, Q4_0 are). Returns whether it could.
fn keep_group(vals: &[f32], d: f16, codes: &mut [i8]) -> bool {
    let df = d.to_f32();
    if !df.is_finite() {
        return false;
    }
    for (c, &v) in codes.iter_mut().zip(vals) {
        let q = if df == 0.0 { 0.0 } else { (v / df).round() };
        if !(-128.0..=127.0).contains(&q) || q * df != v {
            return false;
        }
        *c = q as i8;
    }
    true
}

/// The f16 scale of each 32-element block of a ggml type whose blocks are 32 elements
/// that start with their f16 `d` and dequantize to `d · integer` (Q8_0, Q5_0, Q4_0).
fn block_scale(ty: GgmlType, block: &[u8]) -> Option<f16> {
    matches!(ty, GgmlType::Q8_0 | GgmlType::Q5_0 | GgmlType::Q4_0)
        .then(|| f16::from_bits(u16::from_le_bytes([block[0], block[1]])))
}

impl Q8Tensor {
    /// A zero-filled tensor of the given shape (sizes already checked).
    fn zeroed(rows: usize, cols: usize, n: usize) -> Q8Tensor {
        Q8Tensor {
            rows,
            cols,
            codes: vec![0; n / 4],
            scales: vec![0; scale_words(n / Q8_GROUP)],
        }
    }

    /// Number of groups.
    pub fn groups(&self) -> usize {
        self.rows * self.cols / Q8_GROUP
    }

    /// Group `g`'s scale.
    pub fn scale(&self, g: usize) -> f32 {
        f16::from_bits(self.scale_bits(g)).to_f32()
    }

    /// Group `g`'s scale as stored (f16 bits).
    pub fn scale_bits(&self, g: usize) -> u16 {
        (self.scales[g / 2] >> (16 * (g % 2))) as u16
    }

    fn set_scale(&mut self, g: usize, bits: u16) {
        let shift = 16 * (g % 2);
        let w = &mut self.scales[g / 2];
        *w = (*w & !(0xFFFF << shift)) | (u32::from(bits) << shift);
    }

    /// Store group `g`'s 32 codes.
    fn set_codes(&mut self, g: usize, codes: &[i8; Q8_GROUP]) {
        let words = &mut self.codes[g * Q8_GROUP / 4..][..Q8_GROUP / 4];
        for (w, four) in words.iter_mut().zip(codes.chunks_exact(4)) {
            *w = u32::from_le_bytes([four[0] as u8, four[1] as u8, four[2] as u8, four[3] as u8]);
        }
    }

    /// Group `g`'s 32 codes.
    pub fn group_codes(&self, g: usize) -> [i8; Q8_GROUP] {
        let mut c = [0i8; Q8_GROUP];
        let words = &self.codes[g * Q8_GROUP / 4..][..Q8_GROUP / 4];
        for (four, w) in c.chunks_exact_mut(4).zip(words) {
            for (x, b) in four.iter_mut().zip(w.to_le_bytes()) {
                *x = b as i8;
            }
        }
        c
    }

    /// The matrix as ggml Q8_0 blocks (per group: the f16 scale, then the 32 codes): the
    /// bytes of a Q8_0 tensor with these values.
    pub fn to_ggml_q8_0(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.groups() * (2 + Q8_GROUP));
        for g in 0..self.groups() {
            out.extend_from_slice(&self.scale_bits(g).to_le_bytes());
            out.extend(self.group_codes(g).map(|c| c as u8));
        }
        out
    }

    /// Quantize row-major f32 data (ggml's Q8_0 rounding).
    pub fn quantize(data: &[f32], rows: usize, cols: usize) -> Result<Q8Tensor> {
        let n = checked_elems(rows, cols)?;
        if data.len() != n {
            return Err(Error::InvalidArgument(format!(
                "{} values given for a {rows} × {cols} matrix",
                data.len()
            )));
        }
        let mut t = Q8Tensor::zeroed(rows, cols, n);
        t.fill_from(0, data, None)?;
        Ok(t)
    }

    /// Groups `g0..` from f32 values: kept exactly under `scales[i]` where given and
    /// possible, quantized otherwise. Returns how many were kept.
    fn fill_from(&mut self, g0: usize, vals: &[f32], scales: Option<&[f16]>) -> Result<u64> {
        let mut kept = 0;
        let mut codes = [0i8; Q8_GROUP];
        for (i, group) in vals.chunks_exact(Q8_GROUP).enumerate() {
            let exact = scales.is_some_and(|s| keep_group(group, s[i], &mut codes));
            let bits = if exact {
                kept += 1;
                scales.unwrap()[i].to_bits()
            } else {
                quantize_group(group, &mut codes)?
            };
            self.set_scale(g0 + i, bits);
            self.set_codes(g0 + i, &codes);
        }
        Ok(kept)
    }

    /// Convert ggml-typed row-major data. Q8_0, Q5_0 and Q4_0 groups are kept exactly (the
    /// block's own scale, integer codes); every other type is dequantized and quantized.
    pub fn from_ggml(
        ty: GgmlType,
        bytes: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<(Q8Tensor, MergeStats)> {
        let n = checked_elems(rows, cols)?;
        let mut t = Q8Tensor::zeroed(rows, cols, n);
        let row_bytes = ggml_row_bytes(ty, rows, cols, bytes.len())?;
        let mut stats = MergeStats::default();
        if n == 0 {
            return Ok((t, stats));
        }
        // Dequantize whole rows in bounded batches, then keep or quantize their groups.
        let batch_rows = (CONVERT_CHUNK_ELEMS / cols).max(1);
        let mut scratch = vec![0f32; batch_rows.min(rows) * cols];
        let mut scales = Vec::new();
        for (i, src) in bytes.chunks(batch_rows * row_bytes).enumerate() {
            let vals = &mut scratch[..src.len() / row_bytes * cols];
            gguf_dequant::dequantize_into(ty, src, vals)?;
            scales.clear();
            scales.extend(
                src.chunks_exact(ty.block_bytes())
                    .filter_map(|b| block_scale(ty, b)),
            );
            let exact = (!scales.is_empty()).then_some(&scales[..]);
            let g0 = i * batch_rows * cols / Q8_GROUP;
            let kept = t.fill_from(g0, vals, exact)?;
            stats.groups_exact += kept;
            stats.groups_requantized += (vals.len() / Q8_GROUP) as u64 - kept;
        }
        Ok((t, stats))
    }

    /// Dequantize row `row` into `out` (`out.len() == cols`).
    ///
    /// Panics when `row >= rows` or `out.len() != cols` (a caller bug, not bad data).
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert!(row < self.rows, "row {row} of a {}-row matrix", self.rows);
        assert_eq!(out.len(), self.cols, "output length must equal cols");
        let g0 = row * self.cols / Q8_GROUP;
        let codes = &self.codes_bytes()[row * self.cols..][..self.cols];
        for (i, (vals, group)) in out
            .chunks_exact_mut(Q8_GROUP)
            .zip(codes.chunks_exact(Q8_GROUP))
            .enumerate()
        {
            let d = self.scale(g0 + i);
            for (v, &c) in vals.iter_mut().zip(group) {
                *v = d * f32::from(c as i8);
            }
        }
    }

    pub fn dequantize(&self) -> Vec<f32> {
        dequantize_rows(self.rows, self.cols, |r, out| self.dequantize_row(r, out))
    }

    /// The codes as stored in a package (little-endian words).
    pub fn codes_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.codes)
    }

    /// The scales as stored in a package (little-endian words).
    pub fn scales_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.scales)
    }

    /// Rebuild from the two packed parts (as stored in a package).
    pub fn from_parts(rows: usize, cols: usize, codes: &[u8], scales: &[u8]) -> Result<Q8Tensor> {
        let n = checked_elems(rows, cols)?;
        Ok(Q8Tensor {
            rows,
            cols,
            codes: words_from_le("Q8 g32 codes", codes, n / 4)?,
            scales: words_from_le("Q8 g32 scales", scales, scale_words(n / Q8_GROUP))?,
        })
    }

    /// The rows `rows` of this matrix, in that order (a vocabulary cut). Groups run along
    /// a row, so every group is copied exactly.
    pub fn select_rows(&self, name: &str, rows: &[u32]) -> Result<Q8Tensor> {
        let n = checked_elems(rows.len(), self.cols)?;
        let mut out = Q8Tensor::zeroed(rows.len(), self.cols, n);
        let per_row = self.cols / Q8_GROUP;
        for (i, &r) in rows.iter().enumerate() {
            let r = r as usize;
            if r >= self.rows {
                return Err(Error::InvalidArgument(format!(
                    "{name}: kept token id {r} is past its {} rows",
                    self.rows
                )));
            }
            for g in 0..per_row {
                out.set_scale(i * per_row + g, self.scale_bits(r * per_row + g));
                out.set_codes(i * per_row + g, &self.group_codes(r * per_row + g));
            }
        }
        Ok(out)
    }

    /// Bytes of the two parts for `rows × cols`: `(codes, scales)`.
    pub fn part_bytes(rows: u64, cols: u64) -> Option<(u64, u64)> {
        let n = rows.checked_mul(cols)?;
        Some((n, (n / Q8_GROUP as u64).div_ceil(2) * 4))
    }
}

#[cfg(test)]
mod tests;
