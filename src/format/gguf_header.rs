//! The GGUF header parser behind `Gguf::read_header`: it reads the header's parts
//! ([`Header`]); `gguf.rs` makes them a `Gguf` and checks every tensor's range.
//!
//! Layout (little-endian): magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 kv
//! count, the kv pairs (string key, u32 value type, value), the tensor infos (string name,
//! u32 n_dims, n_dims × u64 dims, u32 type, u64 offset), then padding up to
//! `general.alignment` (default 32) where the data section starts.
//!
//! Defences against hostile input: no allocation is sized from a count or length before it
//! is checked against what the file can hold (its known length, or fixed caps when the
//! length is unknown); containers grow as data actually arrives; nesting depth is bounded.

use super::gguf_types::{GgmlType, MetaValue, TensorInfo, KNOWN_TYPES};
use crate::error::{Error, Result};
use std::collections::HashSet;
use std::io::Read;

/// Longest string accepted (keys, values, tensor names).
pub const MAX_STRING_BYTES: u64 = 1 << 30;
/// Caps for counts when the file length is unknown (streaming).
const MAX_COUNT_UNKNOWN_LEN: u64 = 1 << 28;
/// ggml's GGML_MAX_DIMS.
pub const MAX_DIMS: u32 = 4;
/// Nesting limit for arrays of arrays (real files use 1 level).
const MAX_ARRAY_DEPTH: u32 = 8;
/// Never reserve more than this many elements up front; vectors grow as data arrives.
const MAX_PREALLOC: usize = 1 << 12;
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Value type ids (GGUF's `gguf_type`).
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;

/// A GGUF header as parsed, before `Gguf` holds it with the file's length.
pub(crate) struct Header {
    pub version: u32,
    pub alignment: u64,
    pub metadata: Vec<(String, MetaValue)>,
    pub tensors: Vec<TensorInfo>,
    /// Absolute offset of the data section.
    pub data_offset: u64,
}

pub(crate) struct HeaderReader<'a, R> {
    r: R,
    pos: u64,
    file_len: Option<u64>,
    what: &'a str,
}

impl<'a, R: Read> HeaderReader<'a, R> {
    pub fn new(r: R, file_len: Option<u64>, what: &'a str) -> Self {
        HeaderReader {
            r,
            pos: 0,
            file_len,
            what,
        }
    }

    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::corrupt(self.what, detail)
    }

    fn truncated(&self, needed: u64, available: u64) -> Error {
        Error::ModelTruncated {
            what: self.what.to_string(),
            needed,
            available,
        }
    }

    /// Fill `buf` completely; a short read is `ModelTruncated` with the exact count.
    fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            match self.r.read(&mut buf[got..]) {
                Ok(0) => {
                    let needed = self.pos + buf.len() as u64;
                    return Err(self.truncated(needed, self.pos + got as u64));
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(self.what, e)),
            }
        }
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Check that `count` items of at least `min_bytes` each can still be in the file.
    fn check_count(&self, count: u64, min_bytes: u64, what: &str) -> Result<()> {
        let Some(bytes) = count.checked_mul(min_bytes) else {
            return Err(self.corrupt(format!("{what} count {count} is absurd")));
        };
        match self.file_len {
            Some(len) => {
                let needed = self.pos.saturating_add(bytes);
                if needed > len {
                    return Err(self.truncated(needed, len));
                }
            }
            None if count > MAX_COUNT_UNKNOWN_LEN => {
                return Err(self.corrupt(format!("{what} count {count} is absurd")));
            }
            None => {}
        }
        Ok(())
    }

    fn string(&mut self) -> Result<String> {
        let len = self.u64()?;
        if len > MAX_STRING_BYTES {
            return Err(self.corrupt(format!(
                "string of {len} bytes at offset {} (limit {MAX_STRING_BYTES})",
                self.pos - 8
            )));
        }
        self.check_count(len, 1, "string byte")?;
        let mut buf = Vec::with_capacity((len as usize).min(MAX_PREALLOC));
        (&mut self.r)
            .take(len)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(self.what, e))?;
        if (buf.len() as u64) < len {
            let available = self.pos + buf.len() as u64;
            return Err(self.truncated(self.pos + len, available));
        }
        self.pos += len;
        String::from_utf8(buf).map_err(|e| {
            self.corrupt(format!(
                "string ending at offset {} is not UTF-8: {e}",
                self.pos
            ))
        })
    }

    /// Smallest encoded size of one value of type `ty` (for bounding array counts).
    fn min_value_bytes(ty: u32) -> u64 {
        match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            T_STRING => 8,
            T_ARRAY => 12,
            _ => 8,
        }
    }

    fn value(&mut self, ty: u32, depth: u32) -> Result<MetaValue> {
        Ok(match ty {
            0 => MetaValue::U8(self.u8()?),
            1 => MetaValue::I8(i8::from_le_bytes(self.array()?)),
            2 => MetaValue::U16(u16::from_le_bytes(self.array()?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array()?)),
            4 => MetaValue::U32(self.u32()?),
            5 => MetaValue::I32(i32::from_le_bytes(self.array()?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array()?)),
            7 => match self.u8()? {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(self.corrupt(format!("bool value {b} at offset {}", self.pos - 1))),
            },
            T_STRING => MetaValue::String(self.string()?),
            T_ARRAY => self.array_value(depth)?,
            10 => MetaValue::U64(self.u64()?),
            11 => MetaValue::I64(i64::from_le_bytes(self.array()?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array()?)),
            _ => {
                return Err(Error::Unsupported {
                    what: self.what.to_string(),
                    kind: "metadata value type",
                    name: ty.to_string(),
                    supported: "0..=12 (u8 … f64)",
                })
            }
        })
    }

    fn array_value(&mut self, depth: u32) -> Result<MetaValue> {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(self.corrupt(format!("arrays nested deeper than {MAX_ARRAY_DEPTH}")));
        }
        let elem_ty = self.u32()?;
        let count = self.u64()?;
        self.check_count(count, Self::min_value_bytes(elem_ty), "array element")?;
        let mut items = Vec::with_capacity((count as usize).min(MAX_PREALLOC));
        for _ in 0..count {
            items.push(self.value(elem_ty, depth + 1)?);
        }
        Ok(MetaValue::Array(items))
    }

    fn tensor_info(&mut self) -> Result<TensorInfo> {
        let name = self.string()?;
        let n_dims = self.u32()?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(self.corrupt(format!(
                "tensor {name}: {n_dims} dimensions (1..={MAX_DIMS} allowed)"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(self.u64()?);
        }
        let type_id = self.u32()?;
        let offset = self.u64()?;
        let ty = GgmlType::from_id(type_id).ok_or_else(|| Error::Unsupported {
            what: format!("{}: tensor {name}", self.what),
            kind: "tensor type id",
            name: type_id.to_string(),
            supported: KNOWN_TYPES,
        })?;
        Ok(TensorInfo {
            name,
            dims,
            ty,
            offset,
        })
    }

    /// Shape checks that need no file length: overflow, partial blocks, alignment.
    fn check_tensor(&self, t: &TensorInfo, alignment: u64) -> Result<()> {
        let bad =
            |detail: String| Error::corrupt(format!("{}: tensor {}", self.what, t.name), detail);
        // ggml keeps element counts in int64.
        match t.checked_elements() {
            Some(n) if n <= i64::MAX as u64 => {}
            _ => return Err(bad(format!("dims {:?} overflow", t.dims))),
        }
        let block = t.ty.block_elems() as u64;
        if !t.dims[0].is_multiple_of(block) {
            return Err(bad(format!(
                "row length {} is not a multiple of the {} block size {block}",
                t.dims[0], t.ty
            )));
        }
        if !t.offset.is_multiple_of(alignment) {
            return Err(bad(format!(
                "data offset {} is not a multiple of the alignment {alignment}",
                t.offset
            )));
        }
        Ok(())
    }

    pub fn read(mut self) -> Result<Header> {
        let magic: [u8; 4] = self.array()?;
        if &magic != b"GGUF" {
            return Err(Error::BadMagic {
                what: self.what.to_string(),
                expected: "GGUF",
                found: magic.to_vec(),
            });
        }
        let version = self.u32()?;
        if !(2..=3).contains(&version) {
            return Err(Error::Unsupported {
                what: self.what.to_string(),
                kind: "GGUF version",
                name: version.to_string(),
                supported: "2, 3",
            });
        }
        let n_tensors = self.u64()?;
        let n_kv = self.u64()?;
        // Smallest kv: key length (8) + value type (4) + a 1-byte value.
        self.check_count(n_kv, 13, "metadata")?;

        let mut metadata: Vec<(String, MetaValue)> =
            Vec::with_capacity((n_kv as usize).min(MAX_PREALLOC));
        let mut keys = HashSet::new();
        for _ in 0..n_kv {
            let key = self.string()?;
            let ty = self.u32()?;
            let value = self.value(ty, 0)?;
            if !keys.insert(key.clone()) {
                return Err(self.corrupt(format!("duplicate metadata key {key}")));
            }
            metadata.push((key, value));
        }
        let alignment = self.alignment(&metadata)?;

        // Smallest tensor info: name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
        self.check_count(n_tensors, 32, "tensor")?;
        let mut tensors: Vec<TensorInfo> =
            Vec::with_capacity((n_tensors as usize).min(MAX_PREALLOC));
        let mut names = HashSet::new();
        for _ in 0..n_tensors {
            let t = self.tensor_info()?;
            self.check_tensor(&t, alignment)?;
            if !names.insert(t.name.clone()) {
                return Err(self.corrupt(format!("duplicate tensor name {}", t.name)));
            }
            tensors.push(t);
        }

        let data_offset = self
            .pos
            .checked_next_multiple_of(alignment)
            .ok_or_else(|| self.corrupt("data offset overflows u64"))?;
        Ok(Header {
            version,
            alignment,
            metadata,
            tensors,
            data_offset,
        })
    }

    fn alignment(&self, metadata: &[(String, MetaValue)]) -> Result<u64> {
        let Some((_, v)) = metadata.iter().find(|(k, _)| k == "general.alignment") else {
            return Ok(DEFAULT_ALIGNMENT);
        };
        match v.as_u64() {
            Some(a) if a.is_power_of_two() => Ok(a),
            _ => Err(self.corrupt(format!("general.alignment = {v:?}: must be a power of two"))),
        }
    }
}
