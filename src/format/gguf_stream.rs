//! Converting a GGUF *byte stream* on the fly (the browser loads a GGUF URL this way): the
//! header is collected first ([`header_from_prefix`]), then the file's bytes are fed in
//! chunks of any size, in order ([`GgufStream::feed`]). Every tensor the engine reads comes
//! out as the [`Chunk`]s of the pocket package [`convert`](crate::convert::convert) would
//! write for it — matrices Q4 g64 (Q4_1 pairs with equal params kept bit-exactly, the same
//! `Q4Tensor::from_ggml` as the converter) or, with `keep` or `q8` weights, Q8 g32 where
//! [`WeightFormat::stores_q8`] says (Q8_0 kept exactly, `Q8Tensor::from_ggml`; a stack
//! — q|k|v, gate|up — holding one Q8 matrix is all Q8, as the GPU stacks it), vectors f32
//! — a batch of rows at a time, so the host holds one batch (≈ 256 KiB), never a whole
//! tensor.
//!
//! Chunks name indices into [`GgufStream::tensors`] (the converter's tensor table,
//! [`converted_tensors`]), so a consumer of package chunks (the GPU's streamed upload)
//! takes them unchanged.

use super::gguf::{GgmlType, Gguf};
use super::gguf_dequant::dequantize;
use super::gguf_source::{permuted_heads, unpermute_rows};
use super::package::DType;
use super::package::{Chunk, Manifest, TensorEntry, FORMAT};
use crate::config::ModelConfig;
use crate::convert::converted_tensors_with;
use crate::error::{Error, Result};
use crate::quant::{MergeStats, Q4Tensor, Q8Tensor, WeightFormat, GROUP, Q8_GROUP};

/// A header (metadata + tensor table) larger than this is refused.
pub const MAX_HEADER_BYTES: usize = 64 << 20;
/// Source bytes converted at once (rounded to whole rows, or whole heads).
const BATCH_BYTES: usize = 256 << 10;

/// The header parsed from the first `prefix.len()` bytes of a GGUF stream of `file_len`
/// bytes (when known): `None` while the header runs past the prefix (feed more bytes), an
/// error when the bytes are not a valid GGUF header or it exceeds [`MAX_HEADER_BYTES`].
pub fn header_from_prefix(
    prefix: &[u8],
    file_len: Option<u64>,
    what: &str,
) -> Result<Option<Gguf>> {
    match Gguf::read_header_named(prefix, file_len, what) {
        Ok(g) => Ok(Some(g)),
        // The prefix ran out (not a size check against the whole file).
        Err(Error::ModelTruncated { available, .. })
            if available == prefix.len() as u64 && file_len.is_none_or(|len| available < len) =>
        {
            if prefix.len() >= MAX_HEADER_BYTES {
                return Err(Error::corrupt(
                    what,
                    format!("the GGUF header is larger than {MAX_HEADER_BYTES} bytes"),
                ));
            }
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// One tensor to convert: where its bytes are in the file and how to cut them.
#[derive(Clone, Debug)]
struct Job {
    /// Index into the converted tensor table.
    entry: usize,
    ty: GgmlType,
    /// Absolute file offset of the tensor's first byte.
    start: u64,
    /// Rows × cols (a vector is one row).
    rows: usize,
    cols: usize,
    row_bytes: usize,
    /// Rows converted at once.
    batch_rows: usize,
    /// Llama's permuted q/k rows: the head size to undo it per head, else 0.
    head_rows: usize,
    matrix: bool,
    /// A 4-bit matrix the weights hold as Q4, in a Q8 stack: to Q8 through Q4 g64.
    via_q4: bool,
}

/// Where the stream is: everything needed to resume feeding (see [`GgufStream::rewind`]).
#[derive(Clone, Debug, Default)]
pub struct Cursor {
    /// Absolute offset of the next byte fed.
    pos: u64,
    /// The job receiving bytes.
    job: usize,
    /// Rows of that job already converted.
    rows_done: usize,
    /// The bytes of a batch that arrived split over several chunks.
    buf: Vec<u8>,
}

impl Cursor {
    /// Bytes of the file consumed so far.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

/// A GGUF stream being converted; see the module comment.
pub struct GgufStream {
    gguf: Gguf,
    config: ModelConfig,
    tensors: Vec<TensorEntry>,
    jobs: Vec<Job>,
    cursor: Cursor,
    merge: MergeStats,
    what: String,
}

impl GgufStream {
    /// Plan the conversion of the GGUF whose header is `gguf` to Q4 matrices: every
    /// tensor the engine needs must be present with the config's shape (checked before
    /// any byte is fed).
    pub fn new(gguf: Gguf, what: &str) -> Result<GgufStream> {
        Self::new_as(gguf, what, WeightFormat::Q4)
    }

    /// [`GgufStream::new`] with each matrix as `weights` holds it (see the module doc).
    pub fn new_as(gguf: Gguf, what: &str, weights: WeightFormat) -> Result<GgufStream> {
        let config = ModelConfig::from_gguf(&gguf, gguf.tensor("output.weight").is_some())?;
        let held_q8 = |name: &str| {
            let ty = gguf.tensor(name).map(|t| t.ty.name());
            ty.is_some_and(|ty| weights.stores_q8(ty))
        };
        let tensors =
            converted_tensors_with(&config, |name| stack_of(name).iter().any(|n| held_q8(n)))?;
        let mut jobs = Vec::with_capacity(tensors.len());
        for (entry, t) in tensors.iter().enumerate() {
            let info = gguf
                .tensor(&t.name)
                .ok_or_else(|| Error::MissingTensor(t.name.clone()))?;
            if info.shape() != t.shape {
                return Err(Error::ShapeMismatch {
                    tensor: t.name.clone(),
                    expected: t.shape.clone(),
                    found: info.shape(),
                });
            }
            let matrix = t.shape.len() == 2;
            let (rows, cols) = match matrix {
                true => (t.shape[0], t.shape[1]),
                false => (1, t.shape[0]),
            };
            let range = gguf.tensor_range(info)?;
            let row_bytes = usize::try_from((range.end - range.start) / rows.max(1) as u64)
                .map_err(|_| Error::corrupt(what, format!("tensor {} is too large", t.name)))?;
            // Llama's q/k rows are permuted within each head: convert whole heads.
            let head_rows = match permuted_heads(&config, &t.name) {
                Some(h) if h > 0 && rows % (2 * h) == 0 && (rows / h) % 2 == 0 => rows / h,
                _ => 0,
            };
            let unit = head_rows.max(1);
            let batch_rows = match matrix {
                true => (BATCH_BYTES / row_bytes.max(1) / unit).max(1) * unit,
                false => 1,
            };
            jobs.push(Job {
                entry,
                ty: info.ty,
                start: range.start,
                rows,
                cols,
                row_bytes,
                batch_rows,
                head_rows,
                matrix,
                via_q4: t.dtype == DType::Q8g32 && !weights.stores_q8(info.ty.name()),
            });
        }
        jobs.sort_by_key(|j| j.start);
        for w in jobs.windows(2) {
            if w[0].start + (w[0].rows * w[0].row_bytes) as u64 > w[1].start {
                return Err(Error::corrupt(
                    what,
                    format!(
                        "tensors {} and {} overlap",
                        tensors[w[0].entry].name, tensors[w[1].entry].name
                    ),
                ));
            }
        }
        Ok(GgufStream {
            gguf,
            config,
            tensors,
            jobs,
            cursor: Cursor::default(),
            merge: MergeStats::default(),
            what: what.to_string(),
        })
    }

    /// The converted model as a package manifest without shards (its tensor table, config,
    /// chat template and pooling): what the browser's backend choice and CPU buffers take.
    pub fn manifest(&self) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            config: self.config.clone(),
            tokenizer: None,
            chat_template: self.gguf.get_str("tokenizer.chat_template").map(Into::into),
            pooling: super::pooling::Pooling::from_gguf(&self.gguf),
            tensors: self.tensors.clone(),
            shards: Vec::new(),
        }
    }

    pub fn gguf(&self) -> &Gguf {
        &self.gguf
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The converted tensor table the chunks refer to.
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.tensors
    }

    /// Q4 groups kept bit-exactly vs requantized so far.
    pub fn merge(&self) -> MergeStats {
        self.merge
    }

    /// Where the stream is (to [`rewind`](GgufStream::rewind) to, e.g. before a piece of
    /// the file that may have to be fed again).
    pub fn cursor(&self) -> Cursor {
        self.cursor.clone()
    }

    /// Go back to `cursor`: the bytes from there on are fed again (and their chunks
    /// emitted again, identically).
    pub fn rewind(&mut self, cursor: Cursor) {
        self.cursor = cursor;
    }

    /// Whether every tensor has been converted (the rest of the file is not needed).
    pub fn done(&self) -> bool {
        self.cursor.job >= self.jobs.len()
    }

    /// Feed the next bytes of the file (from wherever the stream is, any size).
    pub fn feed(&mut self, mut bytes: &[u8], emit: &mut impl FnMut(Chunk<'_>)) -> Result<()> {
        while !bytes.is_empty() {
            let Some(job) = self.jobs.get(self.cursor.job).cloned() else {
                self.cursor.pos += bytes.len() as u64; // past the last tensor
                return Ok(());
            };
            let pos = self.cursor.pos;
            if pos < job.start {
                let skip = (job.start - pos).min(bytes.len() as u64) as usize;
                (bytes, self.cursor.pos) = (&bytes[skip..], pos + skip as u64);
                continue;
            }
            let r0 = self.cursor.rows_done;
            let nr = job.batch_rows.min(job.rows - r0);
            let batch_end = job.start + ((r0 + nr) * job.row_bytes) as u64;
            let take = (batch_end - pos).min(bytes.len() as u64) as usize;
            let (now, rest) = bytes.split_at(take);
            (bytes, self.cursor.pos) = (rest, pos + take as u64);
            if self.cursor.pos < batch_end {
                self.cursor.buf.extend_from_slice(now);
                continue;
            }
            // A whole batch: straight from the chunk when it holds all of it.
            let mut buf = std::mem::take(&mut self.cursor.buf);
            let batch = match buf.is_empty() {
                true => now,
                false => {
                    buf.extend_from_slice(now);
                    &buf[..]
                }
            };
            self.convert(&job, r0, nr, batch, emit)?;
            self.cursor.rows_done += nr;
            if self.cursor.rows_done == job.rows {
                (self.cursor.job, self.cursor.rows_done) = (self.cursor.job + 1, 0);
            }
        }
        Ok(())
    }

    /// Rows `r0..r0 + nr` of `job` (their GGUF bytes) as chunks of the converted tensor.
    fn convert(
        &mut self,
        job: &Job,
        r0: usize,
        nr: usize,
        batch: &[u8],
        emit: &mut impl FnMut(Chunk<'_>),
    ) -> Result<()> {
        let name = &self.tensors[job.entry].name;
        let corrupt =
            |e: Error| Error::corrupt(format!("{} tensor {name}", self.what), e.to_string());
        if !job.matrix {
            let values = dequantize(job.ty, batch, job.cols).map_err(corrupt)?;
            emit(Chunk {
                tensor: job.entry,
                part: 0,
                offset: 0,
                bytes: bytemuck::cast_slice(&values),
            });
            return Ok(());
        }
        let unpermuted;
        let batch = match job.head_rows {
            0 => batch,
            h => {
                unpermuted = unpermute_rows(batch, nr, nr / h);
                &unpermuted[..]
            }
        };
        let (q4, q8, stats);
        let (codes, params, codes_at, params_at) = match self.tensors[job.entry].dtype {
            DType::Q8g32 if !job.cols.is_multiple_of(2 * Q8_GROUP) => {
                return Err(Error::InvalidArgument(format!(
                    "{name}: {} columns, not a multiple of 64, do not stream as Q8 g32",
                    job.cols
                )))
            }
            DType::Q8g32 => {
                let rows = (batch, nr, job.cols);
                (q8, stats) = q8_rows(job.ty, rows, job.via_q4).map_err(corrupt)?;
                let (codes, scales) = (q8.codes_bytes(), q8.scales_bytes());
                (codes, scales, r0 * job.cols, r0 * job.cols / 16)
            }
            _ => {
                (q4, stats) = Q4Tensor::from_ggml(job.ty, batch, nr, job.cols).map_err(corrupt)?;
                let (codes, qparams) = (q4.codes_bytes(), q4.qparams_bytes());
                (
                    codes,
                    qparams,
                    r0 * job.cols / 2,
                    r0 * (job.cols / GROUP) * 4,
                )
            }
        };
        self.merge.groups_exact += stats.groups_exact;
        self.merge.groups_requantized += stats.groups_requantized;
        for (part, offset, bytes) in [(0, codes_at as u64, codes), (1, params_at as u64, params)] {
            emit(Chunk {
                tensor: job.entry,
                part,
                offset,
                bytes,
            });
        }
        Ok(())
    }

    /// `Ok` once every tensor was converted; else the stream ended early.
    pub fn finish(&self) -> Result<()> {
        match self.jobs.get(self.cursor.job) {
            None => Ok(()),
            Some(job) => Err(Error::ModelTruncated {
                what: self.what.clone(),
                needed: job.start + (job.rows * job.row_bytes) as u64,
                available: self.cursor.pos,
            }),
        }
    }
}

/// Rows of a ggml tensor as Q8 g32 (`Q8Tensor::from_ggml`: kept exactly where its type
/// allows); `via_q4`: a matrix the weights hold as Q4 in a Q8 stack, through Q4 g64
/// first, as the GPU's upload and the CPU backend's stacks convert it, so every backend
/// computes with the same values.
fn q8_rows(
    ty: GgmlType,
    (bytes, rows, cols): (&[u8], usize, usize),
    via_q4: bool,
) -> Result<(Q8Tensor, MergeStats)> {
    if !via_q4 {
        return Q8Tensor::from_ggml(ty, bytes, rows, cols);
    }
    let (q4, _) = Q4Tensor::from_ggml(ty, bytes, rows, cols)?;
    let q8 = Q8Tensor::quantize(&q4.dequantize(), rows, cols)?;
    let stats = MergeStats {
        groups_exact: 0,
        groups_requantized: (rows * cols / Q8_GROUP) as u64,
    };
    Ok((q8, stats))
}

/// The tensors stacked with `name` into one GPU matrix (q|k|v, gate|up), itself included.
fn stack_of(name: &str) -> Vec<String> {
    let Some((layer, role)) = name
        .rsplit_once('.')
        .and_then(|(stem, _)| stem.rsplit_once('.'))
    else {
        return vec![name.to_string()];
    };
    let roles: &[&str] = match role {
        "attn_q" | "attn_k" | "attn_v" => &["attn_q", "attn_k", "attn_v"],
        "ffn_gate" | "ffn_up" => &["ffn_gate", "ffn_up"],
        _ => return vec![name.to_string()],
    };
    roles
        .iter()
        .map(|r| format!("{layer}.{r}.weight"))
        .collect()
}

#[cfg(test)]
#[path = "gguf_stream_tests.rs"]
mod tests;
