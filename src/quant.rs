//! Q4 g64: asymmetric UINT4 weights, group 64 along K, fp16 scale + fp16 min per group,
//! packed the way the GPU kernels read them (see DESIGN.md "Pocket package").
//!
//! `w = scale · code + min`. Codes: u32[N][K/8]; byte j of a u32 holds element j in its
//! low nibble and element j+4 in its high nibble. Params: u32[N][K/64] =
//! `pack2x16float(scale, min)` (scale in the low half).

use crate::error::Result;

pub const GROUP: usize = 64;

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

impl Q4Tensor {
    /// Quantize row-major f32 data (min/max per group, f16-rounded params).
    pub fn quantize(data: &[f32], rows: usize, cols: usize) -> Result<Q4Tensor> {
        let _ = (data, rows, cols);
        todo!()
    }
    /// Convert ggml-typed row-major data. Q4_1 pairs with equal (d, m) are kept
    /// bit-exactly; everything else is dequantized and requantized.
    pub fn from_ggml(
        ty: crate::format::gguf::GgmlType,
        bytes: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<(Q4Tensor, MergeStats)> {
        let _ = (ty, bytes, rows, cols);
        todo!()
    }
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        let _ = (row, out);
        todo!()
    }
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        for (r, chunk) in out.chunks_mut(self.cols.max(1)).enumerate() {
            self.dequantize_row(r, chunk);
        }
        out
    }
    pub fn codes_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.codes)
    }
    pub fn qparams_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.qparams)
    }
    /// Rebuild from the two packed parts (as stored in a package).
    pub fn from_parts(rows: usize, cols: usize, codes: &[u8], qparams: &[u8]) -> Result<Q4Tensor> {
        let _ = (rows, cols, codes, qparams);
        todo!()
    }
}
