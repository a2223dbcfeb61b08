//! Convert a model (GGUF file or HF folder, via `ModelSource`) into a pocket package:
//! every matrix becomes Q4 g64 (Q4_1 pairs with equal params kept bit-exactly) or Q8 g32
//! (Q8_0, Q5_0 kept exactly), as [`WeightFormat`] chooses per tensor; norms and biases
//! stay f32; the tokenizer and chat template travel along.

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::package::{DType, Manifest, PackageWriter, Part, TensorEntry, ALIGN};
use crate::format::ModelSource;
use crate::quant::{MergeStats, Q4Tensor, QMatrix, WeightFormat, GROUP};
use std::path::Path;

#[derive(Clone, Debug)]
pub struct ConvertOptions {
    /// Quantization group along K; only 64 is supported (the GPU kernels' layout).
    pub group: usize,
    /// Shard size in bytes (default: the package maximum, 32 MiB).
    pub shard_bytes: Option<u64>,
    /// How each matrix is stored (default Q4 g64: what every backend runs today).
    pub weights: WeightFormat,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            group: GROUP,
            shard_bytes: None,
            weights: WeightFormat::Q4,
        }
    }
}

/// Progress of a conversion, reported after each tensor.
#[derive(Clone, Debug)]
pub struct Progress<'a> {
    pub tensor: &'a str,
    pub tensors_done: usize,
    pub tensors_total: usize,
    /// Source bytes read so far / in all.
    pub bytes_done: u64,
    pub bytes_total: u64,
}

#[derive(Clone, Debug)]
pub struct ConvertReport {
    pub manifest: Manifest,
    /// Q4 g64 groups kept bit-exactly vs requantized.
    pub merge: MergeStats,
    /// Q8 g32 groups kept exactly vs quantized.
    pub merge_q8: MergeStats,
    /// Package bytes (all shards).
    pub package_bytes: u64,
    /// Source tensors the runtime does not use (not written).
    pub skipped: Vec<String>,
    pub has_tokenizer: bool,
}

/// A vocabulary cut applied while converting (see [`crate::prune`]): the token embedding
/// and an untied LM head keep only the rows `rows` (old ids, in new-id order); the package
/// gets `config` and `tokenizer_json` instead of the source's.
pub struct VocabCut<'a> {
    pub rows: &'a [u32],
    pub config: &'a ModelConfig,
    pub tokenizer_json: &'a str,
}

/// The tensors indexed by token id.
const VOCAB_ROW_TENSORS: [&str; 2] = ["token_embd.weight", "output.weight"];

pub fn convert(
    src: &mut dyn ModelSource,
    out: &Path,
    opts: &ConvertOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ConvertReport> {
    convert_with_cut(src, out, opts, None, progress)
}

/// [`convert`], with the vocabulary cut down to `cut` when given.
pub fn convert_with_cut(
    src: &mut dyn ModelSource,
    out: &Path,
    opts: &ConvertOptions,
    cut: Option<&VocabCut>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ConvertReport> {
    if opts.group != GROUP {
        return Err(Error::InvalidArgument(format!(
            "--group {}: only group size {GROUP} is supported (the GPU kernels' layout)",
            opts.group
        )));
    }
    let config = src.config().clone();
    let expected = config.expected_tensors();
    // Check the whole tensor table before writing anything.
    let mut plan = Vec::with_capacity(expected.len());
    for (name, shape) in &expected {
        let t = src
            .tensors()
            .iter()
            .find(|t| &t.name == name)
            .ok_or_else(|| Error::MissingTensor(name.clone()))?;
        if &t.shape != shape {
            return Err(Error::ShapeMismatch {
                tensor: name.clone(),
                expected: shape.clone(),
                found: t.shape.clone(),
            });
        }
        plan.push((name.clone(), shape.clone(), t.bytes));
    }
    let skipped: Vec<String> = src
        .tensors()
        .iter()
        .filter(|t| !expected.iter().any(|(n, _)| n == &t.name))
        .map(|t| t.name.clone())
        .collect();
    let bytes_total = plan.iter().map(|p| p.2).sum();

    let out_config = cut.map_or_else(|| config.clone(), |c| c.config.clone());
    let mut writer = PackageWriter::create(out, out_config)?;
    if let Some(size) = opts.shard_bytes {
        writer = writer.with_shard_size(size)?;
    }
    let (mut merge, mut merge_q8) = (MergeStats::default(), MergeStats::default());
    let mut bytes_done = 0;
    for (i, (name, shape, bytes)) in plan.iter().enumerate() {
        if shape.len() == 2 {
            let (q, stats) = src.read_matrix(name, opts.weights)?;
            let rows = cut
                .filter(|_| VOCAB_ROW_TENSORS.contains(&name.as_str()))
                .map(|c| c.rows);
            match q {
                QMatrix::Q4(mut q) => {
                    merge.add(stats);
                    if let Some(rows) = rows {
                        q = select_rows(name, &q, rows)?;
                    }
                    writer.add_tensor(
                        name,
                        DType::Q4g64,
                        &[q.rows, q.cols],
                        &[("codes", q.codes_bytes()), ("qparams", q.qparams_bytes())],
                    )?;
                }
                QMatrix::Q8(mut q) => {
                    merge_q8.add(stats);
                    if let Some(rows) = rows {
                        q = q.select_rows(name, rows)?;
                    }
                    writer.add_tensor(
                        name,
                        DType::Q8g32,
                        &[q.rows, q.cols],
                        &[("codes", q.codes_bytes()), ("scales", q.scales_bytes())],
                    )?;
                }
            }
        } else {
            let data = src.read_f32(name)?;
            writer.add_tensor(
                name,
                DType::F32,
                shape,
                &[("data", bytemuck::cast_slice(&data))],
            )?;
        }
        bytes_done += bytes;
        progress(&Progress {
            tensor: name,
            tensors_done: i + 1,
            tensors_total: plan.len(),
            bytes_done,
            bytes_total,
        });
    }
    let tokenizer = match cut {
        Some(c) => Some(c.tokenizer_json.to_string()),
        None => src.tokenizer_json()?,
    };
    if let Some(json) = &tokenizer {
        writer.set_tokenizer(json)?;
    }
    writer.set_chat_template(src.chat_template());
    writer.set_pooling(src.pooling());
    let manifest = writer.finish()?;
    Ok(ConvertReport {
        package_bytes: manifest.shards.iter().map(|s| s.bytes).sum(),
        manifest,
        merge,
        merge_q8,
        skipped,
        has_tokenizer: tokenizer.is_some(),
    })
}

/// The rows `rows` of a Q4 g64 matrix, in that order. Groups run along a row, so every
/// group is copied exactly.
fn select_rows(name: &str, q: &Q4Tensor, rows: &[u32]) -> Result<Q4Tensor> {
    let (code_words, param_words) = (q.cols / 8, q.cols / GROUP);
    let mut out = Q4Tensor {
        rows: rows.len(),
        cols: q.cols,
        codes: Vec::with_capacity(rows.len() * code_words),
        qparams: Vec::with_capacity(rows.len() * param_words),
    };
    for &r in rows {
        let r = r as usize;
        if r >= q.rows {
            return Err(Error::InvalidArgument(format!(
                "{name}: kept token id {r} is past its {} rows",
                q.rows
            )));
        }
        out.codes
            .extend_from_slice(&q.codes[r * code_words..(r + 1) * code_words]);
        out.qparams
            .extend_from_slice(&q.qparams[r * param_words..(r + 1) * param_words]);
    }
    Ok(out)
}

/// The bytes [`convert`] writes for a model of this config: every part of every tensor,
/// each starting on the package alignment.
pub fn package_bytes(config: &ModelConfig) -> Result<u64> {
    let tensors = converted_tensors(config)?;
    let end = tensors
        .iter()
        .flat_map(|t| &t.parts)
        .map(|p| p.offset + p.bytes);
    Ok(end.max().unwrap_or(0))
}

/// The tensor table [`convert`] writes for a model of this config with Q4 weights (the
/// default), in order: matrices Q4 g64, vectors f32, every part at the next aligned offset
/// of the package's stream.
pub fn converted_tensors(config: &ModelConfig) -> Result<Vec<TensorEntry>> {
    converted_tensors_with(config, |_| false)
}

/// [`converted_tensors`] with the matrices `q8(name)` says in Q8 g32.
pub fn converted_tensors_with(
    config: &ModelConfig,
    q8: impl Fn(&str) -> bool,
) -> Result<Vec<TensorEntry>> {
    let mut pos = 0u64;
    let mut out = Vec::new();
    for (name, shape) in config.expected_tensors() {
        let dtype = match shape.len() == 2 {
            true if q8(&name) => DType::Q8g32,
            true => DType::Q4g64,
            false => DType::F32,
        };
        let parts = dtype
            .expected_parts(&shape)
            .map_err(|e| Error::InvalidArgument(format!("tensor {name}: {e}")))?;
        let parts = parts
            .into_iter()
            .map(|(part, bytes)| {
                let offset = pos.div_ceil(ALIGN) * ALIGN;
                pos = offset + bytes;
                Part {
                    name: part.to_string(),
                    offset,
                    bytes,
                }
            })
            .collect();
        out.push(TensorEntry {
            name,
            dtype,
            shape,
            parts,
        });
    }
    Ok(out)
}
