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
pub use super::gguf_types::{GgmlType, MetaValue, TensorInfo};
use crate::error::{Error, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

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
        let header = HeaderReader::new(reader, file_len, what).read()?;
        let gguf = Gguf {
            version: header.version,
            alignment: header.alignment,
            metadata: header.metadata,
            tensors: header.tensors,
            data_offset: header.data_offset,
            file_len,
        };
        // With a known length every tensor must lie inside the file.
        for t in &gguf.tensors {
            gguf.tensor_range(t)?;
        }
        Ok(gguf)
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
