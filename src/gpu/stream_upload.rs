//! Streaming a pocket package into GPU buffers: the buffers are allocated up front (the
//! same [`layout`] as the disk upload), every tensor part of the manifest is routed to its
//! place in them, and shard bytes are written with `queue.writeBuffer` as they arrive —
//! the host never holds more than the chunk in hand (plus up to 3 carried bytes per shard).
//!
//! Shards are independent: each gets its own [`ShardWriter`], so they can stream in any
//! order or in parallel. Written bytes are unverified until the shard's
//! [`ShardReader::finish`](crate::format::package::ShardReader::finish) succeeds; a shard
//! that fails is simply written again (the same bytes land at the same places).

use super::device::GpuContext;
use super::weights::{alloc_matrix, assemble, is_vocab_table, layout, Filled, ModelWeights, Slot};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::package::{Chunk, DType, Manifest, TensorEntry};
use crate::gpu::kernels::MatrixFormat;
use std::collections::HashMap;

/// Where one tensor part goes.
#[derive(Clone, Debug)]
struct Route {
    buffer: wgpu::Buffer,
    /// Byte offset of the part's first element in `buffer`.
    offset: u64,
    /// The part is f16 (converted to f32 on the way: destination offsets double).
    half: bool,
}

impl Route {
    /// Bytes that must be written together (one f32 / one u32 word, or one f16).
    fn unit(&self) -> usize {
        if self.half {
            2
        } else {
            4
        }
    }
}

/// Empty GPU buffers for a package's model, and the route of every tensor part.
pub struct StreamedWeights {
    config: ModelConfig,
    filled: Vec<Filled>,
    /// (manifest tensor index, part index) → destination. Parts the engine does not read
    /// have no route and are skipped.
    routes: HashMap<(usize, usize), Route>,
}

/// The manifest entry `name`, checked to hold `shape` in one of `dtypes`.
/// The stored type of the tensors stacked in matrix slot `label` (q4g64 or q8g32, the
/// same for all: their bytes are routed to the GPU as they are), its GPU format and the
/// name of its params part.
fn stacked_dtype(
    tensors: &[TensorEntry],
    label: &str,
    parts: &[(String, usize)],
) -> Result<(DType, MatrixFormat, &'static str)> {
    let dtype_of = |name: &str| {
        let t = tensors.iter().find(|t| t.name == name);
        t.map(|t| t.dtype)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    };
    let first = dtype_of(&parts[0].0)?;
    for (name, _) in &parts[1..] {
        if dtype_of(name)? != first {
            return Err(Error::Unsupported {
                what: label.to_string(),
                kind: "stack of matrices for streaming to the GPU",
                name: "q4g64 and q8g32 mixed".to_string(),
                supported: "one type per stack: convert with --weights q4 or q8",
            });
        }
    }
    match first {
        DType::Q4g64 => Ok((first, MatrixFormat::Q4, "qparams")),
        DType::Q8g32 => Ok((first, MatrixFormat::Q8, "scales")),
        other => Err(Error::Unsupported {
            what: parts[0].0.clone(),
            kind: "dtype for streaming to the GPU",
            name: other.name().to_string(),
            supported: "q4g64, q8g32",
        }),
    }
}

fn entry_of(
    tensors: &[TensorEntry],
    name: &str,
    shape: &[usize],
    dtypes: &[DType],
    supported: &'static str,
) -> Result<usize> {
    let index = tensors
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| Error::MissingTensor(name.to_string()))?;
    let t = &tensors[index];
    if !dtypes.contains(&t.dtype) {
        return Err(Error::Unsupported {
            what: name.to_string(),
            kind: "dtype for streaming to the GPU",
            name: t.dtype.name().to_string(),
            supported,
        });
    }
    let elements: usize = t.shape.iter().product();
    let same = t.shape == shape || (shape.len() == 1 && elements == shape[0]);
    if !same {
        return Err(Error::ShapeMismatch {
            tensor: name.to_string(),
            expected: shape.to_vec(),
            found: t.shape.clone(),
        });
    }
    Ok(index)
}

/// Index of part `name` of manifest tensor `tensor`.
fn part_index(tensors: &[TensorEntry], tensor: usize, name: &str) -> Result<usize> {
    let t = &tensors[tensor];
    t.parts
        .iter()
        .position(|p| p.name == name)
        .ok_or_else(|| Error::Manifest(format!("tensor {} has no {name} part", t.name)))
}

impl StreamedWeights {
    /// Allocate the model's buffers on `ctx` and route every tensor `manifest` must hold
    /// (Q4 g64 or Q8 g32 matrices, one type per stack; f32 or f16 vectors). Fails before
    /// any upload when a tensor is
    /// missing or has the wrong type or shape.
    pub fn allocate(ctx: &GpuContext, manifest: &Manifest) -> Result<StreamedWeights> {
        manifest.validate()?;
        Self::allocate_for(ctx, &manifest.config, &manifest.tensors)
    }

    /// Whether every matrix stack of a `config` model with `tensors` streams to the GPU:
    /// one type per stack (q4g64 or q8g32); the error says which does not.
    pub fn check_stacks(config: &ModelConfig, tensors: &[TensorEntry]) -> Result<()> {
        for slot in layout(config) {
            if let Slot::Matrix { label, parts, .. } = slot {
                stacked_dtype(tensors, &label, &parts)?;
            }
        }
        Ok(())
    }

    /// [`StreamedWeights::allocate`] for a tensor table without shards (e.g. the one a
    /// GGUF streams into, [`crate::format::gguf_stream`]): chunks name indices into
    /// `tensors`.
    pub fn allocate_for(
        ctx: &GpuContext,
        config: &ModelConfig,
        tensors: &[TensorEntry],
    ) -> Result<StreamedWeights> {
        let config = config.clone();
        let mut routes = HashMap::new();
        let mut filled = Vec::new();
        for slot in layout(&config) {
            match slot {
                Slot::Matrix { label, parts, cols } => {
                    let rows = parts.iter().map(|p| p.1).sum();
                    let (dtype, format, params) = stacked_dtype(tensors, &label, &parts)?;
                    let table = is_vocab_table(&parts);
                    let m = alloc_matrix(ctx, &label, (rows, cols), format, table)?;
                    let (mut codes_at, mut params_at) = (0u64, 0u64);
                    for (name, r) in &parts {
                        let t = entry_of(tensors, name, &[*r, cols], &[dtype], dtype.name())?;
                        for (part, buffer, at) in [
                            ("codes", &m.codes, &mut codes_at),
                            (params, &m.qparams, &mut params_at),
                        ] {
                            let p = part_index(tensors, t, part)?;
                            let route = Route {
                                buffer: buffer.clone(),
                                offset: *at,
                                half: false,
                            };
                            routes.insert((t, p), route);
                            *at += tensors[t].parts[p].bytes;
                        }
                    }
                    filled.push(Filled::Matrix(m));
                }
                Slot::Vector { label, parts } => {
                    let total: usize = parts.iter().map(|p| p.1).sum();
                    let buffer = ctx.storage(&label, 4 * total as u64)?;
                    let mut at = 0u64;
                    for (name, len) in &parts {
                        let dtypes = [DType::F32, DType::F16];
                        let t = entry_of(tensors, name, &[*len], &dtypes, "f32, f16")?;
                        let p = part_index(tensors, t, "data")?;
                        let half = tensors[t].dtype == DType::F16;
                        let route = Route {
                            buffer: buffer.clone(),
                            offset: at,
                            half,
                        };
                        routes.insert((t, p), route);
                        at += 4 * *len as u64;
                    }
                    filled.push(Filled::Vector(buffer));
                }
            }
        }
        Ok(StreamedWeights {
            config,
            filled,
            routes,
        })
    }

    /// A writer for one shard's chunks.
    pub fn writer<'a>(&'a self, ctx: &'a GpuContext) -> ShardWriter<'a> {
        ShardWriter {
            weights: self,
            ctx,
            carry: Vec::new(),
            carry_at: (0, 0, 0),
            error: None,
        }
    }

    /// The weights, once every shard was written and verified.
    pub fn finish(self) -> Result<ModelWeights> {
        assemble(&self.config, self.filled)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }
}

/// Writes one shard's [`Chunk`]s to the GPU. Writes must be whole 4-byte words (2-byte
/// f16 values, converted): a value split between two chunks is carried to the next one.
pub struct ShardWriter<'a> {
    weights: &'a StreamedWeights,
    ctx: &'a GpuContext,
    /// The start of a value whose rest is in the next chunk.
    carry: Vec<u8>,
    /// (tensor, part, offset in the part) of `carry[0]`.
    carry_at: (usize, usize, u64),
    /// The first error; the shard is bad once set.
    error: Option<Error>,
}

impl ShardWriter<'_> {
    /// Write one chunk (the [`ShardReader`](crate::format::package::ShardReader) emit
    /// callback). Errors are kept for [`ShardWriter::finish`].
    pub fn write(&mut self, c: Chunk<'_>) {
        if self.error.is_none() {
            if let Err(e) = self.try_write(c) {
                self.error = Some(e);
            }
        }
    }

    fn try_write(&mut self, c: Chunk<'_>) -> Result<()> {
        let Some(route) = self.weights.routes.get(&(c.tensor, c.part)) else {
            return Ok(()); // a tensor the engine does not read
        };
        let unit = route.unit();
        let (mut bytes, mut at) = (c.bytes, c.offset);
        if !self.carry.is_empty() {
            let (t, p, o) = self.carry_at;
            if (t, p, o + self.carry.len() as u64) != (c.tensor, c.part, c.offset) {
                return Err(self.split_value());
            }
            let take = (unit - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            (bytes, at) = (&bytes[take..], at + take as u64);
            if self.carry.len() < unit {
                return Ok(());
            }
            let value = std::mem::take(&mut self.carry);
            self.put(route, o, &value);
        }
        if at % unit as u64 != 0 {
            return Err(self.split_value());
        }
        let whole = bytes.len() / unit * unit;
        self.put(route, at, &bytes[..whole]);
        if whole < bytes.len() {
            self.carry = bytes[whole..].to_vec();
            self.carry_at = (c.tensor, c.part, at + whole as u64);
        }
        Ok(())
    }

    fn split_value(&self) -> Error {
        Error::Manifest(
            "a shard boundary splits a value (shards must end on a 4-byte boundary)".into(),
        )
    }

    /// Write whole values `bytes`, found at `at` in the part, to the GPU.
    fn put(&self, route: &Route, at: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let queue = &self.ctx.queue;
        if route.half {
            let values = crate::format::source::f16_from_le(bytes);
            queue.write_buffer(
                &route.buffer,
                route.offset + 2 * at,
                bytemuck::cast_slice(&values),
            );
        } else {
            queue.write_buffer(&route.buffer, route.offset + at, bytes);
        }
    }

    /// The shard's outcome: the first write error, or a value left incomplete.
    pub fn finish(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if !self.carry.is_empty() {
            return Err(self.split_value());
        }
        Ok(())
    }
}
