//! `ModelSource`: one way to read a model's config and tensors, whatever file holds it
//! (a GGUF file, an HF folder of safetensors + config.json, or a pocket package).
//! Tensor names are canonical (llama.cpp's: `blk.N.attn_q.weight`, …); shapes row-major.

use crate::config::ModelConfig;
use crate::error::Result;
use crate::quant::{MergeStats, Q4Tensor, Q8Tensor, QMatrix, WeightFormat};

/// A tensor as the source stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceTensor {
    /// Canonical name.
    pub name: String,
    /// Row-major shape.
    pub shape: Vec<usize>,
    /// Stored type, for display (`Q4_K`, `bf16`, `q4g64`, …).
    pub dtype: String,
    /// Stored bytes.
    pub bytes: u64,
}

pub trait ModelSource {
    fn config(&self) -> &ModelConfig;
    fn tensors(&self) -> &[SourceTensor];
    /// The tensor's values as f32 (dequantized when stored quantized).
    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>>;
    /// The tensor as Q4 g64: kept exactly when already stored so (or as Q4_1 pairs with
    /// equal params), quantized otherwise.
    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)>;
    /// The tensor as Q8 g32: kept exactly where the stored values are int8 multiples of
    /// one f16 scale per 32 (ggml Q8_0, Q5_0, Q4_0; a package's q8g32), quantized
    /// otherwise. By default: [`ModelSource::read_f32`], quantized.
    fn read_q8(&mut self, name: &str) -> Result<(Q8Tensor, MergeStats)> {
        let shape = self.tensor(name)?.shape.clone();
        let (rows, cols) = matrix_dims(name, &shape)?;
        quantize_q8_counted(&self.read_f32(name)?, rows, cols)
    }
    /// The listed tensor called `name`.
    fn tensor(&self, name: &str) -> Result<&SourceTensor> {
        let found = self.tensors().iter().find(|t| t.name == name);
        found.ok_or_else(|| crate::error::Error::MissingTensor(name.to_string()))
    }
    /// The matrix in the type `format` gives it ([`WeightFormat::stores_q8`] of its stored
    /// type).
    fn read_matrix(&mut self, name: &str, format: WeightFormat) -> Result<(QMatrix, MergeStats)> {
        Ok(if format.stores_q8(&self.tensor(name)?.dtype) {
            let (q, stats) = self.read_q8(name)?;
            (QMatrix::Q8(q), stats)
        } else {
            let (q, stats) = self.read_q4(name)?;
            (QMatrix::Q4(q), stats)
        })
    }
    /// The pooling of embeddings the model declares (a GGUF's `pooling_type`, a
    /// sentence-transformers folder's `1_Pooling`, a package's manifest); `None` where it
    /// says nothing.
    fn pooling(&self) -> Option<super::pooling::Pooling> {
        None
    }
    /// An HF tokenizer.json for the model, when the source has (or can derive) one.
    fn tokenizer_json(&mut self) -> Result<Option<String>>;
    /// The model's Jinja chat template, if any.
    fn chat_template(&self) -> Option<String>;
    /// A short name of the container ("gguf v3", "safetensors", "pocket package").
    fn container(&self) -> String;
    /// Bytes that tell this model's weights apart from another's of the same shapes (a
    /// package's shard hashes, a synthetic model's seed), for the identity a session
    /// snapshot records ([`super::model_fingerprint`], which adds the config and
    /// the tensor list). Empty where the source has nothing cheap to add.
    fn identity(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// `(rows, cols)` of a 2-D tensor: only matrices are stored as Q4 g64.
pub fn matrix_dims(name: &str, shape: &[usize]) -> Result<(usize, usize)> {
    match *shape {
        [rows, cols] => Ok((rows, cols)),
        _ => Err(crate::error::Error::InvalidArgument(format!(
            "{name}: shape {shape:?} is not a matrix; only 2-D tensors are stored as Q4"
        ))),
    }
}

/// Quantize f32 data to Q4 g64, every group counted as requantized.
pub fn quantize_counted(data: &[f32], rows: usize, cols: usize) -> Result<(Q4Tensor, MergeStats)> {
    let q = Q4Tensor::quantize(data, rows, cols)?;
    let stats = MergeStats {
        groups_exact: 0,
        groups_requantized: q.qparams.len() as u64,
    };
    Ok((q, stats))
}

/// Quantize f32 data to Q8 g32, every group counted as requantized.
pub fn quantize_q8_counted(
    data: &[f32],
    rows: usize,
    cols: usize,
) -> Result<(Q8Tensor, MergeStats)> {
    let q = Q8Tensor::quantize(data, rows, cols)?;
    let stats = MergeStats {
        groups_exact: 0,
        groups_requantized: q.groups() as u64,
    };
    Ok((q, stats))
}

/// Little-endian f32 bytes as values.
pub fn f32_from_le(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Little-endian f16 bytes as f32 values.
pub fn f16_from_le(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect()
}
