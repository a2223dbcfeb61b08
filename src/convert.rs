//! Convert a model (GGUF file or HF folder, via `ModelSource`) into a pocket package:
//! every matrix becomes Q4 g64 (Q4_1 pairs with equal params kept bit-exactly), norms and
//! biases stay f32, the tokenizer and chat template travel along.

use crate::error::{Error, Result};
use crate::format::package::{DType, Manifest, PackageWriter};
use crate::format::ModelSource;
use crate::quant::{MergeStats, GROUP};
use std::path::Path;

#[derive(Clone, Debug)]
pub struct ConvertOptions {
    /// Quantization group along K; only 64 is supported (the GPU kernels' layout).
    pub group: usize,
    /// Shard size in bytes (default: the package maximum, 32 MiB).
    pub shard_bytes: Option<u64>,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            group: GROUP,
            shard_bytes: None,
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
    /// Q4 groups kept bit-exactly vs requantized.
    pub merge: MergeStats,
    /// Package bytes (all shards).
    pub package_bytes: u64,
    /// Source tensors the runtime does not use (not written).
    pub skipped: Vec<String>,
    pub has_tokenizer: bool,
}

pub fn convert(
    src: &mut dyn ModelSource,
    out: &Path,
    opts: &ConvertOptions,
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

    let mut writer = PackageWriter::create(out, config)?;
    if let Some(size) = opts.shard_bytes {
        writer = writer.with_shard_size(size)?;
    }
    let mut merge = MergeStats::default();
    let mut bytes_done = 0;
    for (i, (name, shape, bytes)) in plan.iter().enumerate() {
        if shape.len() == 2 {
            let (q, stats) = src.read_q4(name)?;
            merge.groups_exact += stats.groups_exact;
            merge.groups_requantized += stats.groups_requantized;
            writer.add_tensor(
                name,
                DType::Q4g64,
                shape,
                &[("codes", q.codes_bytes()), ("qparams", q.qparams_bytes())],
            )?;
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
    let tokenizer = src.tokenizer_json()?;
    if let Some(json) = &tokenizer {
        writer.set_tokenizer(json)?;
    }
    writer.set_chat_template(src.chat_template());
    let manifest = writer.finish()?;
    Ok(ConvertReport {
        package_bytes: manifest.shards.iter().map(|s| s.bytes).sum(),
        manifest,
        merge,
        skipped,
        has_tokenizer: tokenizer.is_some(),
    })
}
