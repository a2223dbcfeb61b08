//! Q4 g64: asymmetric UINT4 weights, group 64 along K, fp16 scale + fp16 min per group,
//! packed the way the GPU kernels read them (see DESIGN.md "Pocket package").
//!
//! `w = scale · code + min`. Codes: u32[N][K/8]; byte j of a u32 holds element j in its
//! low nibble and element j+4 in its high nibble, so `unpack4xU8(x & 0x0F0F0F0F)` gives
//! 4 consecutive K values and `unpack4xU8((x >> 4) & 0x0F0F0F0F)` the next 4. Params:
//! u32[N][K/64] = `pack2x16float(scale, min)` (scale in the low half).
//!
//! Because K is a multiple of 64, the groups of a row-major matrix are simply the
//! consecutive 64-element chunks of its flattened data: group g owns code words
//! `8g..8g+8` and param word `g`.

use crate::error::{Error, Result};
use crate::format::gguf::GgmlType;
use crate::format::gguf_dequant;
use half::f16;

mod q8;
pub use q8::{Q8Tensor, Q8_GROUP};

pub const GROUP: usize = 64;
/// Code words (8 nibbles each) per group.
const WORDS_PER_GROUP: usize = GROUP / 8;
/// ggml Q4_1 block: f16 d, f16 m, 16 bytes of nibbles for 32 elements.
const Q4_1_BLOCK_BYTES: usize = 20;
/// Two Q4_1 blocks make one g64 group.
const Q4_1_PAIR_BYTES: usize = 2 * Q4_1_BLOCK_BYTES;
/// Elements dequantized at a time when converting other ggml types (bounds the f32
/// scratch buffer instead of dequantizing a whole embedding table at once).
const CONVERT_CHUNK_ELEMS: usize = 1 << 20;

/// A Q4 g64 matrix of `rows × cols` (cols = K, a multiple of 64).
#[derive(Clone, Debug, PartialEq)]
pub struct Q4Tensor {
    pub rows: usize,
    pub cols: usize,
    /// `rows * cols / 8` words.
    pub codes: Vec<u32>,
    /// `rows * cols / 64` words.
    pub qparams: Vec<u32>,
}

/// How a conversion went: groups kept bit-exactly vs requantized.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeStats {
    pub groups_exact: u64,
    pub groups_requantized: u64,
}

impl MergeStats {
    /// `groups` groups, every one kept bit-exactly (a matrix read as it is stored).
    pub fn exact(groups: usize) -> MergeStats {
        MergeStats {
            groups_exact: groups as u64,
            groups_requantized: 0,
        }
    }
}

/// How a conversion or a load stores each weight matrix (`convert --weights`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WeightFormat {
    /// Every matrix as Q4 g64 (the GPU kernels' format; half the bytes of Q8).
    Q4,
    /// Every matrix as Q8 g32.
    Q8,
    /// As its author quantized it: 4-bit types (ggml Q4_0 and Q4_1, a package's q4g64) as
    /// Q4 g64, everything else (Q8_0, Q5, the K-quants, f16, bf16, f32) as Q8 g32, so
    /// Q8_0 and Q5_0 are kept exactly and nothing loses more than 8-bit rounding.
    #[default]
    Keep,
}

impl WeightFormat {
    /// Whether a matrix stored as `dtype` (a [`crate::format::SourceTensor`]'s: a ggml type
    /// name, `q4g64`, `bf16`, ...) is held as Q8 g32.
    pub fn stores_q8(self, dtype: &str) -> bool {
        match self {
            WeightFormat::Q4 => false,
            WeightFormat::Q8 => true,
            WeightFormat::Keep => !matches!(dtype, "Q4_0" | "Q4_1" | "q4g64"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Q4 => "q4",
            WeightFormat::Q8 => "q8",
            WeightFormat::Keep => "keep",
        }
    }
}

impl std::str::FromStr for WeightFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<WeightFormat> {
        match s {
            "q4" => Ok(WeightFormat::Q4),
            "q8" => Ok(WeightFormat::Q8),
            "keep" => Ok(WeightFormat::Keep),
            _ => Err(Error::InvalidArgument(format!(
                "weights {s:?}: expected q4, q8 or keep"
            ))),
        }
    }
}

/// A quantized weight matrix in either stored format.
#[derive(Clone, Debug, PartialEq)]
pub enum QMatrix {
    Q4(Q4Tensor),
    Q8(Q8Tensor),
}

impl QMatrix {
    pub fn rows(&self) -> usize {
        match self {
            QMatrix::Q4(q) => q.rows,
            QMatrix::Q8(q) => q.rows,
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            QMatrix::Q4(q) => q.cols,
            QMatrix::Q8(q) => q.cols,
        }
    }

    /// Row `row` as f32 into `out` (`out.len() == cols`).
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        match self {
            QMatrix::Q4(q) => q.dequantize_row(row, out),
            QMatrix::Q8(q) => q.dequantize_row(row, out),
        }
    }
}

impl MergeStats {
    /// Count `other`'s groups too.
    pub fn add(&mut self, other: MergeStats) {
        self.groups_exact += other.groups_exact;
        self.groups_requantized += other.groups_requantized;
    }
}

/// `pack2x16float(scale, min)`: scale in the low 16 bits.
pub fn pack_params(scale: f16, min: f16) -> u32 {
    u32::from(scale.to_bits()) | (u32::from(min.to_bits()) << 16)
}

/// The inverse of [`pack_params`], widened to f32: `(scale, min)`.
pub fn unpack_params(word: u32) -> (f32, f32) {
    (
        f16::from_bits(word as u16).to_f32(),
        f16::from_bits((word >> 16) as u16).to_f32(),
    )
}

/// Pack 8 consecutive codes (each 0..=15) into one word: byte j = `c[j] | c[j+4] << 4`.
pub fn pack_codes8(c: &[u8; 8]) -> u32 {
    (0..4).fold(0u32, |w, j| {
        let byte = u32::from(c[j] & 0xF) | (u32::from(c[j + 4] & 0xF) << 4);
        w | (byte << (8 * j))
    })
}

/// Row `row` of a row-major Q4 g64 matrix of `rows × cols` (cols a multiple of 64), from
/// the matrix's code and param words: `scale·code + min`.
///
/// Panics when `row >= rows` or `out.len() != cols` (a caller bug, not bad data).
pub fn dequantize_row_of(
    (codes, params): (&[u32], &[u32]),
    (rows, cols): (usize, usize),
    row: usize,
    out: &mut [f32],
) {
    assert!(row < rows, "row {row} of a {rows}-row matrix");
    assert_eq!(out.len(), cols, "output length must equal cols");
    let g0 = row * (cols / GROUP);
    for (g, vals) in out.chunks_exact_mut(GROUP).enumerate() {
        let (scale, min) = unpack_params(params[g0 + g]);
        let words = &codes[(g0 + g) * WORDS_PER_GROUP..][..WORDS_PER_GROUP];
        for (eight, &w) in vals.chunks_exact_mut(8).zip(words) {
            for (v, c) in eight.iter_mut().zip(unpack_codes8(w)) {
                *v = scale * f32::from(c) + min;
            }
        }
    }
}

/// The inverse of [`pack_codes8`].
pub fn unpack_codes8(w: u32) -> [u8; 8] {
    let mut c = [0u8; 8];
    for j in 0..4 {
        let byte = (w >> (8 * j)) as u8;
        c[j] = byte & 0xF;
        c[j + 4] = byte >> 4;
    }
    c
}

/// Store one group's 64 codes as 8 words.
fn pack_group(codes: &[u8; GROUP], out: &mut [u32]) {
    for (word, c) in out.iter_mut().zip(codes.chunks_exact(8)) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(c);
        *word = pack_codes8(&eight);
    }
}

/// Quantize one group of 64 finite values against f16-rounded params.
fn quantize_group(vals: &[f32], codes: &mut [u32]) -> Result<u32> {
    let mut lo = f32::INFINITY;
    let mut hi = f32::NEG_INFINITY;
    for &v in vals {
        if !v.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "cannot quantize a non-finite value ({v})"
            )));
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    let min_h = f16::from_f32(lo);
    let scale_h = f16::from_f32((hi - lo) / 15.0);
    if !min_h.is_finite() || !scale_h.is_finite() {
        return Err(Error::InvalidArgument(format!(
            "a group spans [{lo}, {hi}], beyond what f16 scale/min can hold (|min| ≤ 65504, \
             range ≤ 15·65504)"
        )));
    }
    let (scale, min) = (scale_h.to_f32(), min_h.to_f32());
    let mut q = [0u8; GROUP];
    if scale > 0.0 {
        for (c, &v) in q.iter_mut().zip(vals) {
            *c = ((v - min) / scale).round().clamp(0.0, 15.0) as u8;
        }
    }
    pack_group(&q, codes);
    Ok(pack_params(scale_h, min_h))
}

/// Quantize consecutive groups of `data` into the matching code / param words.
fn quantize_into(data: &[f32], codes: &mut [u32], qparams: &mut [u32]) -> Result<()> {
    for ((vals, words), param) in data
        .chunks_exact(GROUP)
        .zip(codes.chunks_exact_mut(WORDS_PER_GROUP))
        .zip(qparams.iter_mut())
    {
        *param = quantize_group(vals, words)?;
    }
    Ok(())
}

/// Dequantize one ggml Q4_1 block (32 values) into `out`.
fn dequant_q4_1_block(block: &[u8], out: &mut [f32]) {
    let d = f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32();
    let m = f16::from_bits(u16::from_le_bytes([block[2], block[3]])).to_f32();
    for (j, &b) in block[4..Q4_1_BLOCK_BYTES].iter().enumerate() {
        out[j] = d * f32::from(b & 0xF) + m;
        out[j + 16] = d * f32::from(b >> 4) + m;
    }
}

/// Convert one g64 group stored as two Q4_1 blocks. Returns whether it was kept exactly.
fn merge_q4_1_pair(pair: &[u8], codes: &mut [u32], param: &mut u32) -> Result<bool> {
    let (b0, b1) = pair.split_at(Q4_1_BLOCK_BYTES);
    if b0[..4] == b1[..4] {
        let d = f16::from_bits(u16::from_le_bytes([b0[0], b0[1]]));
        let m = f16::from_bits(u16::from_le_bytes([b0[2], b0[3]]));
        if !d.is_finite() || !m.is_finite() {
            return Err(Error::corrupt(
                "Q4_1 tensor",
                format!("block params d={d}, m={m} are not finite"),
            ));
        }
        let mut q = [0u8; GROUP];
        for (half_idx, block) in [b0, b1].into_iter().enumerate() {
            let base = half_idx * 32;
            for (j, &b) in block[4..].iter().enumerate() {
                q[base + j] = b & 0xF;
                q[base + j + 16] = b >> 4;
            }
        }
        pack_group(&q, codes);
        *param = pack_params(d, m);
        Ok(true)
    } else {
        let mut vals = [0f32; GROUP];
        dequant_q4_1_block(b0, &mut vals[..32]);
        dequant_q4_1_block(b1, &mut vals[32..]);
        *param = quantize_group(&vals, codes)?;
        Ok(false)
    }
}

/// Checked `rows * cols`, with `cols` a multiple of the group size.
fn checked_elems(rows: usize, cols: usize) -> Result<usize> {
    checked_group_elems("Q4 g64", GROUP, rows, cols)
}

/// Checked `rows * cols` of a `format` matrix, with `cols` a multiple of its `group`.
fn checked_group_elems(format: &str, group: usize, rows: usize, cols: usize) -> Result<usize> {
    if !cols.is_multiple_of(group) {
        return Err(Error::InvalidArgument(format!(
            "{format} needs the column count (K) to be a multiple of {group}, got {cols}"
        )));
    }
    rows.checked_mul(cols).ok_or_else(|| {
        Error::InvalidArgument(format!("a {rows} × {cols} matrix is too large to address"))
    })
}

/// Bytes per row of a `rows × cols` ggml `ty` matrix, checked against the `len` given.
fn ggml_row_bytes(ty: GgmlType, rows: usize, cols: usize, len: usize) -> Result<usize> {
    let row_bytes = usize::try_from(ty.bytes_for(cols as u64)?)
        .map_err(|_| Error::InvalidArgument("row too large".into()))?;
    if rows.checked_mul(row_bytes) != Some(len) {
        return Err(Error::InvalidArgument(format!(
            "{} {rows} × {cols} matrix needs {row_bytes} bytes per row, got {len} bytes in all",
            ty.name(),
        )));
    }
    Ok(row_bytes)
}

/// Every row of a `rows × cols` matrix as f32, row by row through `row`.
fn dequantize_rows(rows: usize, cols: usize, row: impl Fn(usize, &mut [f32])) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for (r, chunk) in out.chunks_mut(cols.max(1)).enumerate() {
        row(r, chunk);
    }
    out
}

/// Read little-endian u32 words from a byte slice of exactly `4 * words` bytes.
fn words_from_le(what: &str, bytes: &[u8], words: usize) -> Result<Vec<u32>> {
    if words.checked_mul(4) != Some(bytes.len()) {
        return Err(Error::InvalidArgument(format!(
            "{what}: {} bytes, expected {words} words",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

impl Q4Tensor {
    /// A zero-filled tensor of the given shape (sizes already checked).
    fn zeroed(rows: usize, cols: usize, n: usize) -> Q4Tensor {
        Q4Tensor {
            rows,
            cols,
            codes: vec![0; n / 8],
            qparams: vec![0; n / GROUP],
        }
    }

    /// Quantize row-major f32 data (min/max per group, f16-rounded params).
    pub fn quantize(data: &[f32], rows: usize, cols: usize) -> Result<Q4Tensor> {
        let n = checked_elems(rows, cols)?;
        if data.len() != n {
            return Err(Error::InvalidArgument(format!(
                "{} values given for a {rows} × {cols} matrix",
                data.len()
            )));
        }
        let mut t = Q4Tensor::zeroed(rows, cols, n);
        quantize_into(data, &mut t.codes, &mut t.qparams)?;
        Ok(t)
    }

    /// Convert ggml-typed row-major data. Q4_1 pairs with equal (d, m) are kept
    /// bit-exactly; everything else is dequantized and requantized.
    pub fn from_ggml(
        ty: GgmlType,
        bytes: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<(Q4Tensor, MergeStats)> {
        let n = checked_elems(rows, cols)?;
        let mut t = Q4Tensor::zeroed(rows, cols, n);
        let mut stats = MergeStats::default();
        if ty == GgmlType::Q4_1 {
            let expected = n / 32 * Q4_1_BLOCK_BYTES;
            if bytes.len() != expected {
                return Err(Error::InvalidArgument(format!(
                    "Q4_1 {rows} × {cols} matrix needs {expected} bytes, got {}",
                    bytes.len()
                )));
            }
            for ((pair, codes), param) in bytes
                .chunks_exact(Q4_1_PAIR_BYTES)
                .zip(t.codes.chunks_exact_mut(WORDS_PER_GROUP))
                .zip(t.qparams.iter_mut())
            {
                if merge_q4_1_pair(pair, codes, param)? {
                    stats.groups_exact += 1;
                } else {
                    stats.groups_requantized += 1;
                }
            }
            return Ok((t, stats));
        }
        // Other types: dequantize whole rows in bounded batches, then quantize them.
        let row_bytes = ggml_row_bytes(ty, rows, cols, bytes.len())?;
        if n == 0 {
            return Ok((t, stats));
        }
        let batch_rows = (CONVERT_CHUNK_ELEMS / cols).max(1);
        let words_per_row = cols / 8;
        let params_per_row = cols / GROUP;
        let mut scratch = vec![0f32; batch_rows.min(rows) * cols];
        for (i, src) in bytes.chunks(batch_rows * row_bytes).enumerate() {
            let r0 = i * batch_rows;
            let nr = src.len() / row_bytes;
            let vals = &mut scratch[..nr * cols];
            gguf_dequant::dequantize_into(ty, src, vals)?;
            quantize_into(
                vals,
                &mut t.codes[r0 * words_per_row..(r0 + nr) * words_per_row],
                &mut t.qparams[r0 * params_per_row..(r0 + nr) * params_per_row],
            )?;
        }
        stats.groups_requantized = t.qparams.len() as u64;
        Ok((t, stats))
    }

    /// Dequantize row `row` into `out` (`out.len() == cols`).
    ///
    /// Panics when `row >= rows` or `out.len() != cols` (a caller bug, not bad data).
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        let words = (&self.codes[..], &self.qparams[..]);
        dequantize_row_of(words, (self.rows, self.cols), row, out);
    }

    pub fn dequantize(&self) -> Vec<f32> {
        dequantize_rows(self.rows, self.cols, |r, out| self.dequantize_row(r, out))
    }

    /// The codes as stored in a package (little-endian words).
    pub fn codes_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.codes)
    }

    /// The params as stored in a package (little-endian words).
    pub fn qparams_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.qparams)
    }

    /// Rebuild from the two packed parts (as stored in a package).
    pub fn from_parts(rows: usize, cols: usize, codes: &[u8], qparams: &[u8]) -> Result<Q4Tensor> {
        let n = checked_elems(rows, cols)?;
        Ok(Q4Tensor {
            rows,
            cols,
            codes: words_from_le("Q4 g64 codes", codes, n / 8)?,
            qparams: words_from_le("Q4 g64 qparams", qparams, n / GROUP)?,
        })
    }
}

#[cfg(test)]
mod tests;
