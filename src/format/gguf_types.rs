//! The values a GGUF file is made of, shared by its reader (`gguf.rs`), header parser
//! (`gguf_header.rs`), dequantizer (`gguf_dequant.rs`) and writer: the ggml tensor types
//! with their block sizes, metadata values, and the tensor table's entries.

use crate::error::{Error, Result};

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
