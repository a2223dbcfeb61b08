//! GGUF v2/v3 reader: header, metadata of every value type, tensor table, alignment.
//!
//! API contract (other modules code against it):
//! - `Gguf::read_header(reader, file_len)` parses everything up to the data section
//!   without reading tensor data (the browser streams the header first);
//! - `Gguf::parse(bytes)` does the same from a byte slice;
//! - `tensor_range(t)` gives the absolute byte range of a tensor's data, validated against
//!   the file length when it is known.
//!
//! Every count and length read from the file is checked before anything is allocated from
//! it (see `gguf_header.rs`), so a hostile or truncated file yields a typed error, never a
//! panic or a huge allocation.

use super::gguf_header::HeaderReader;
pub use super::gguf_header::{DEFAULT_ALIGNMENT, MAX_DIMS, MAX_STRING_BYTES};
use crate::error::{Error, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// ggml tensor types (the values are GGUF's on-disk ids).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    BF16,
}

/// (type, on-disk id, elements per block, bytes per block, name) — ggml's type traits.
const TYPE_TABLE: [(GgmlType, u32, usize, usize, &str); 15] = [
    (GgmlType::F32, 0, 1, 4, "F32"),
    (GgmlType::F16, 1, 1, 2, "F16"),
    (GgmlType::Q4_0, 2, 32, 18, "Q4_0"),
    (GgmlType::Q4_1, 3, 32, 20, "Q4_1"),
    (GgmlType::Q5_0, 6, 32, 22, "Q5_0"),
    (GgmlType::Q5_1, 7, 32, 24, "Q5_1"),
    (GgmlType::Q8_0, 8, 32, 34, "Q8_0"),
    (GgmlType::Q8_1, 9, 32, 40, "Q8_1"),
    (GgmlType::Q2_K, 10, 256, 84, "Q2_K"),
    (GgmlType::Q3_K, 11, 256, 110, "Q3_K"),
    (GgmlType::Q4_K, 12, 256, 144, "Q4_K"),
    (GgmlType::Q5_K, 13, 256, 176, "Q5_K"),
    (GgmlType::Q6_K, 14, 256, 210, "Q6_K"),
    (GgmlType::Q8_K, 15, 256, 292, "Q8_K"),
    (GgmlType::BF16, 30, 1, 2, "BF16"),
];

/// The type names this reader knows, for error messages.
pub(crate) const KNOWN_TYPES: &str =
    "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K";

impl GgmlType {
    fn traits(self) -> (GgmlType, u32, usize, usize, &'static str) {
        // The table lists every variant exactly once (checked by a unit test).
        TYPE_TABLE
            .iter()
            .copied()
            .find(|e| e.0 == self)
            .unwrap_or(TYPE_TABLE[0])
    }
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TYPE_TABLE.iter().map(|e| e.0)
    }
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TYPE_TABLE.iter().find(|e| e.1 == id).map(|e| e.0)
    }
    pub fn id(self) -> u32 {
        self.traits().1
    }
    /// Elements per block (1 for F32/F16/BF16).
    pub fn block_elems(self) -> usize {
        self.traits().2
    }
    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        self.traits().3
    }
    /// Bytes for `n` elements; an error when `n` is not a whole number of blocks.
    pub fn bytes_for(self, n: u64) -> Result<u64> {
        let be = self.block_elems() as u64;
        if !n.is_multiple_of(be) {
            return Err(Error::InvalidArgument(format!(
                "{n} elements is not a whole number of {} blocks of {be}",
                self.name()
            )));
        }
        (n / be)
            .checked_mul(self.block_bytes() as u64)
            .ok_or_else(|| {
                Error::InvalidArgument(format!("{n} {} elements overflow u64 bytes", self.name()))
            })
    }
    pub fn name(self) -> &'static str {
        self.traits().4
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// Any integer type that fits, as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }
    /// Any integer type that fits, as i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetaValue::I8(v) => Some(v.into()),
            MetaValue::I16(v) => Some(v.into()),
            MetaValue::I32(v) => Some(v.into()),
            MetaValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }
    /// F32/F64 or an integer, as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            MetaValue::I8(_) | MetaValue::I16(_) | MetaValue::I32(_) | MetaValue::I64(_) => {
                self.as_i64().map(|v| v as f64)
            }
            _ => self.as_u64().map(|v| v as f64),
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
    /// GGUF's on-disk value type id (0 u8 … 12 f64).
    pub fn type_id(&self) -> u32 {
        match self {
            MetaValue::U8(_) => 0,
            MetaValue::I8(_) => 1,
            MetaValue::U16(_) => 2,
            MetaValue::I16(_) => 3,
            MetaValue::U32(_) => 4,
            MetaValue::I32(_) => 5,
            MetaValue::F32(_) => 6,
            MetaValue::Bool(_) => 7,
            MetaValue::String(_) => 8,
            MetaValue::Array(_) => 9,
            MetaValue::U64(_) => 10,
            MetaValue::I64(_) => 11,
            MetaValue::F64(_) => 12,
        }
    }
}

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the innermost (contiguous) dimension, i.e. K of a weight.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Offset relative to the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Element count (saturates at u64::MAX; headers from the reader never overflow).
    pub fn n_elements(&self) -> u64 {
        self.checked_elements().unwrap_or(u64::MAX)
    }
    /// Element count, None on u64 overflow.
    pub fn checked_elements(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }
    /// Bytes of data (whole blocks; an error on overflow or a partial block).
    pub fn n_bytes(&self) -> Result<u64> {
        let n = self.checked_elements().ok_or_else(|| {
            Error::corrupt(
                format!("tensor {}", self.name),
                format!("dims {:?} overflow u64", self.dims),
            )
        })?;
        self.ty
            .bytes_for(n)
            .map_err(|e| Error::corrupt(format!("tensor {}", self.name), e.to_string()))
    }
    /// Shape in row-major (PyTorch) order: the reverse of `dims`.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }
}

/// A parsed GGUF header.
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    pub alignment: u64,
    pub metadata: Vec<(String, MetaValue)>,
    pub tensors: Vec<TensorInfo>,
    /// Absolute offset of the data section.
    pub data_offset: u64,
    /// Total file length, when known (validates tensor ranges).
    pub file_len: Option<u64>,
}

impl Gguf {
    /// Parse the header from `reader` (positioned at the file's start), stopping at the end
    /// of the tensor table. With `file_len`, every count is bounded by it and every tensor
    /// must lie inside the file (else `ModelTruncated`).
    pub fn read_header<R: Read>(reader: R, file_len: Option<u64>) -> Result<Gguf> {
        Self::read_header_named(reader, file_len, "GGUF")
    }

    /// `read_header` with a name (e.g. the path) for error messages.
    pub fn read_header_named<R: Read>(
        reader: R,
        file_len: Option<u64>,
        what: &str,
    ) -> Result<Gguf> {
        HeaderReader::new(reader, file_len, what).read_gguf()
    }

    /// Parse a whole file (or at least its header plus all tensor data) held in memory.
    pub fn parse(bytes: &[u8]) -> Result<Gguf> {
        Self::read_header(bytes, Some(bytes.len() as u64))
    }

    /// Open a GGUF file: its parsed header and the file, ready for `read_tensor_bytes`.
    pub fn open(path: impl AsRef<Path>) -> Result<(Gguf, std::fs::File)> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut buffered = std::io::BufReader::with_capacity(1 << 16, &file);
        let g = Self::read_header_named(&mut buffered, Some(len), &path.display().to_string())?;
        drop(buffered);
        Ok((g, file))
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(MetaValue::as_u64)
    }
    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(MetaValue::as_f64)
    }
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(MetaValue::as_str)
    }
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Absolute byte range of a tensor's data.
    pub fn tensor_range(&self, t: &TensorInfo) -> Result<std::ops::Range<u64>> {
        let what = || format!("tensor {}", t.name);
        // checked_rem: a hand-built `Gguf` may carry alignment 0.
        if t.offset.checked_rem(self.alignment) != Some(0) {
            return Err(Error::corrupt(
                what(),
                format!(
                    "data offset {} is not a multiple of the alignment {}",
                    t.offset, self.alignment
                ),
            ));
        }
        let len = t.n_bytes()?;
        let start = self.data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(len));
        let (Some(start), Some(end)) = (start, end) else {
            return Err(Error::corrupt(
                what(),
                format!("offset {} + {len} bytes overflow u64", t.offset),
            ));
        };
        if let Some(file_len) = self.file_len {
            if end > file_len {
                return Err(Error::ModelTruncated {
                    what: what(),
                    needed: end,
                    available: file_len,
                });
            }
        }
        Ok(start..end)
    }

    /// Read a tensor's raw bytes (seek + read_exact); a short file gives `ModelTruncated`.
    pub fn read_tensor_bytes<F: Read + Seek>(
        &self,
        file: &mut F,
        t: &TensorInfo,
    ) -> Result<Vec<u8>> {
        let range = self.tensor_range(t)?;
        read_range(file, range, &t.name)
    }

    /// Bytes of one row (`dims[0]` elements) of a tensor.
    pub fn row_bytes(t: &TensorInfo) -> Result<u64> {
        let first = t.dims.first().copied().unwrap_or(1);
        t.ty.bytes_for(first)
            .map_err(|e| Error::corrupt(format!("tensor {}", t.name), e.to_string()))
    }

    /// Read rows `rows` of a tensor (a row is `dims[0]` elements; e.g. one token's
    /// embedding), without reading the rest of it.
    pub fn read_rows<F: Read + Seek>(
        &self,
        file: &mut F,
        t: &TensorInfo,
        rows: std::ops::Range<u64>,
    ) -> Result<Vec<u8>> {
        let range = self.tensor_range(t)?;
        let row = Self::row_bytes(t)?;
        let n_rows = (range.end - range.start).checked_div(row).unwrap_or(0);
        if rows.start > rows.end || rows.end > n_rows {
            return Err(Error::InvalidArgument(format!(
                "tensor {}: rows {rows:?} out of 0..{n_rows}",
                t.name
            )));
        }
        let start = range.start + rows.start * row;
        read_range(file, start..range.start + rows.end * row, &t.name)
    }

    /// Read and dequantize a whole tensor to f32 (see `gguf_dequant` for supported types).
    pub fn read_tensor_f32<F: Read + Seek>(
        &self,
        file: &mut F,
        t: &TensorInfo,
    ) -> Result<Vec<f32>> {
        let bytes = self.read_tensor_bytes(file, t)?;
        let n = usize::try_from(t.n_elements()).map_err(|_| {
            Error::corrupt(
                format!("tensor {}", t.name),
                "too many elements for this platform",
            )
        })?;
        super::gguf_dequant::dequantize(t.ty, &bytes, n)
    }
}

/// Read `range` of `file` exactly; a short file is `ModelTruncated`.
fn read_range<F: Read + Seek>(
    file: &mut F,
    range: std::ops::Range<u64>,
    tensor: &str,
) -> Result<Vec<u8>> {
    let what = format!("tensor {tensor}");
    file.seek(SeekFrom::Start(range.start))
        .map_err(|e| Error::io(&what, e))?;
    // `take` + `read_to_end` grows the buffer only as data actually arrives.
    let mut buf = Vec::new();
    file.take(range.end - range.start)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(&what, e))?;
    if (buf.len() as u64) < range.end - range.start {
        return Err(Error::ModelTruncated {
            what,
            needed: range.end,
            available: range.start + buf.len() as u64,
        });
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_table_lists_each_variant_once_with_its_id() {
        for (i, (ty, id, ..)) in TYPE_TABLE.iter().enumerate() {
            assert_eq!(GgmlType::from_id(*id), Some(*ty));
            assert_eq!(ty.id(), *id);
            assert!(TYPE_TABLE[i + 1..].iter().all(|e| e.0 != *ty && e.1 != *id));
        }
        assert_eq!(GgmlType::from_id(4), None); // Q4_2: removed from ggml
    }

    #[test]
    fn bytes_for_rejects_partial_blocks_and_overflow() {
        assert_eq!(GgmlType::Q4_K.bytes_for(512).unwrap(), 288);
        assert_eq!(GgmlType::F32.bytes_for(3).unwrap(), 12);
        assert!(GgmlType::Q4_0.bytes_for(33).is_err());
        assert!(GgmlType::F32.bytes_for(u64::MAX).is_err());
    }

    #[test]
    fn meta_value_conversions_respect_sign_and_type() {
        assert_eq!(MetaValue::I32(-1).as_u64(), None);
        assert_eq!(MetaValue::I64(7).as_u64(), Some(7));
        assert_eq!(MetaValue::U64(u64::MAX).as_i64(), None);
        assert_eq!(MetaValue::I8(-3).as_f64(), Some(-3.0));
        assert_eq!(MetaValue::Bool(true).as_u64(), None);
        assert_eq!(MetaValue::String("x".into()).as_str(), Some("x"));
    }
}
