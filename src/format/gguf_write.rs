//! A small GGUF v3 writer: metadata, tensors (already encoded bytes), alignment.
//! Used by tests and `pocketrt synth --gguf`; the reader in `gguf.rs` parses its output.
//!
//! ```
//! use pocketrt::format::gguf::{GgmlType, MetaValue};
//! use pocketrt::format::gguf_write::GgufWriter;
//! let mut w = GgufWriter::new();
//! w.meta("general.architecture", MetaValue::String("qwen3".into()));
//! w.tensor("a", &[2], GgmlType::F32, &[0u8; 8]).unwrap();
//! let bytes = w.to_bytes().unwrap();
//! assert_eq!(&bytes[..4], b"GGUF");
//! ```

use super::gguf::{GgmlType, MetaValue, DEFAULT_ALIGNMENT, MAX_DIMS};
use crate::error::{Error, Result};
use std::io::{Read, Write};

const ALIGNMENT_KEY: &str = "general.alignment";

#[derive(Clone, Debug, Default)]
pub struct GgufWriter {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

#[derive(Clone, Debug)]
struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    bytes: Vec<u8>,
}

/// GGUF's type id of a string value.
const STRING_TYPE: u32 = 8;

fn invalid(detail: String) -> Error {
    Error::InvalidArgument(format!("GGUF writer: {detail}"))
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    /// Set a metadata key (replacing an earlier value of the same key, keeping its place).
    pub fn meta(&mut self, key: &str, value: MetaValue) -> &mut Self {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key.to_string(), value)),
        }
        self
    }

    /// Set `general.alignment` (a power of two; checked when writing).
    pub fn alignment(&mut self, alignment: u32) -> &mut Self {
        self.meta(ALIGNMENT_KEY, MetaValue::U32(alignment))
    }

    /// Add a tensor: `dims` in ggml order (innermost first), `bytes` already encoded as `ty`.
    pub fn tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        bytes: &[u8],
    ) -> Result<&mut Self> {
        if dims.is_empty() || dims.len() > MAX_DIMS as usize {
            return Err(invalid(format!("tensor {name}: {} dims", dims.len())));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(invalid(format!("duplicate tensor {name}")));
        }
        if !dims[0].is_multiple_of(ty.block_elems() as u64) {
            return Err(invalid(format!(
                "tensor {name}: row length {} is not a multiple of the {ty} block size",
                dims[0]
            )));
        }
        let n = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| invalid(format!("tensor {name}: dims {dims:?} overflow")))?;
        let need = ty.bytes_for(n)?;
        if need != bytes.len() as u64 {
            return Err(invalid(format!(
                "tensor {name}: {n} {ty} elements take {need} bytes, got {}",
                bytes.len()
            )));
        }
        self.tensors.push(PendingTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            bytes: bytes.to_vec(),
        });
        Ok(self)
    }

    fn alignment_value(&self) -> Result<u64> {
        match self.metadata.iter().find(|(k, _)| k == ALIGNMENT_KEY) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some((_, MetaValue::U32(a))) if a.is_power_of_two() => Ok(u64::from(*a)),
            Some((_, v)) => Err(invalid(format!(
                "{ALIGNMENT_KEY} = {v:?}: must be a u32 power of two"
            ))),
        }
    }

    /// Write the whole file: the header, then each tensor's data streamed from memory.
    pub fn write_to(&self, mut w: impl Write) -> Result<()> {
        let (header, align) = self.header_bytes()?;
        let io = |e| Error::io("GGUF writer output", e);
        w.write_all(&header).map_err(io)?;
        for t in &self.tensors {
            w.write_all(&t.bytes).map_err(io)?;
            let pad = (t.bytes.len() as u64).next_multiple_of(align) - t.bytes.len() as u64;
            std::io::copy(&mut std::io::repeat(0).take(pad), &mut w).map_err(io)?;
        }
        w.flush().map_err(io)
    }

    /// The whole file as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_to(&mut out)?;
        Ok(out)
    }

    /// Everything before the data section (padded to the alignment), and the alignment.
    fn header_bytes(&self) -> Result<(Vec<u8>, u64)> {
        let align = self.alignment_value()?;
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        put_u32(&mut out, 3);
        put_u64(&mut out, self.tensors.len() as u64);
        put_u64(&mut out, self.metadata.len() as u64);
        for (key, value) in &self.metadata {
            put_str(&mut out, key);
            put_u32(&mut out, value.type_id());
            put_value(&mut out, value)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            put_u32(&mut out, t.dims.len() as u32);
            for &d in &t.dims {
                put_u64(&mut out, d);
            }
            put_u32(&mut out, t.ty.id());
            put_u64(&mut out, offset);
            offset = (offset + t.bytes.len() as u64).next_multiple_of(align);
        }
        let len = (out.len() as u64).next_multiple_of(align);
        out.resize(len as usize, 0);
        Ok((out, align))
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A value without its type id (arrays carry their element type and count).
fn put_value(out: &mut Vec<u8>, v: &MetaValue) -> Result<()> {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => put_u32(out, *x),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U64(x) => put_u64(out, *x),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(u8::from(*x)),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(items) => {
            // GGUF arrays are homogeneous. An empty one has no element to take the type
            // from: it is written as an array of strings, the type of the arrays a model
            // leaves empty (llama.cpp rejects a `tokenizer.ggml.merges` of any other type).
            let elem_ty = items.first().map_or(STRING_TYPE, MetaValue::type_id);
            if items.iter().any(|x| x.type_id() != elem_ty) {
                return Err(invalid(
                    "metadata array mixes value types (GGUF arrays are homogeneous)".into(),
                ));
            }
            put_u32(out, elem_ty);
            put_u64(out, items.len() as u64);
            for item in items {
                put_value(out, item)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::gguf::Gguf;

    #[test]
    fn written_file_reads_back_with_same_metadata_tensors_and_alignment() {
        let mut w = GgufWriter::new();
        w.alignment(64)
            .meta("a.u8", MetaValue::U8(7))
            .meta("a.i64", MetaValue::I64(-5))
            .meta("a.f64", MetaValue::F64(0.25))
            .meta("a.bool", MetaValue::Bool(true))
            .meta(
                "a.nested",
                MetaValue::Array(vec![
                    MetaValue::Array(vec![MetaValue::I32(1), MetaValue::I32(2)]),
                    MetaValue::Array(vec![MetaValue::String("x".into())]),
                ]),
            )
            .meta("a.empty", MetaValue::Array(vec![]));
        let t0: Vec<u8> = (0..12).collect();
        let t1: Vec<u8> = (0..18).map(|i| i * 3).collect();
        w.tensor("t0", &[3], GgmlType::F32, &t0).unwrap();
        w.tensor("t1", &[32, 1], GgmlType::Q4_0, &t1).unwrap();
        let bytes = w.to_bytes().unwrap();

        let g = Gguf::parse(&bytes).unwrap();
        assert_eq!(g.version, 3);
        assert_eq!(g.alignment, 64);
        assert_eq!(g.data_offset % 64, 0);
        assert_eq!(g.metadata.len(), 7);
        assert_eq!(
            g.get("a.nested"),
            w.metadata.iter().find(|m| m.0 == "a.nested").map(|m| &m.1)
        );
        assert_eq!(g.get("a.empty"), Some(&MetaValue::Array(vec![])));
        assert_eq!(g.get_f64("a.i64"), Some(-5.0));
        let t = g.tensor("t1").unwrap();
        assert_eq!(
            (t.dims.as_slice(), t.ty, t.offset),
            (&[32u64, 1][..], GgmlType::Q4_0, 64)
        );
        let r = g.tensor_range(t).unwrap();
        assert_eq!(&bytes[r.start as usize..r.end as usize], &t1[..]);
        let r0 = g.tensor_range(g.tensor("t0").unwrap()).unwrap();
        assert_eq!(&bytes[r0.start as usize..r0.end as usize], &t0[..]);
    }

    #[test]
    fn an_empty_array_is_written_as_an_array_of_strings() {
        let key = "tokenizer.ggml.merges";
        let mut w = GgufWriter::new();
        w.meta(key, MetaValue::Array(vec![]));
        let bytes = w.to_bytes().unwrap();
        let at = bytes
            .windows(key.len())
            .position(|k| k == key.as_bytes())
            .expect("the key is written")
            + key.len();
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        assert_eq!(u32_at(at), MetaValue::Array(vec![]).type_id(), "an array");
        let element = MetaValue::String(String::new()).type_id();
        assert_eq!(u32_at(at + 4), element, "of strings");
        assert_eq!(&bytes[at + 8..at + 16], &[0; 8], "with no element");
        let g = Gguf::parse(&bytes).unwrap();
        assert_eq!(g.get(key), Some(&MetaValue::Array(vec![])));
    }

    #[test]
    fn writer_rejects_bad_tensors_and_alignment() {
        let mut w = GgufWriter::new();
        assert!(w.tensor("a", &[33], GgmlType::Q4_0, &[0; 18]).is_err());
        assert!(w.tensor("a", &[32], GgmlType::Q4_0, &[0; 17]).is_err());
        assert!(w
            .tensor("a", &[1, 1, 1, 1, 1], GgmlType::F32, &[0; 4])
            .is_err());
        w.tensor("a", &[1], GgmlType::F32, &[0; 4]).unwrap();
        assert!(w.tensor("a", &[1], GgmlType::F32, &[0; 4]).is_err());
        w.alignment(24);
        assert!(w.to_bytes().is_err());
        w.meta(
            "m",
            MetaValue::Array(vec![MetaValue::U8(1), MetaValue::I8(1)]),
        );
        w.alignment(8);
        assert!(w.to_bytes().is_err());
    }
}
