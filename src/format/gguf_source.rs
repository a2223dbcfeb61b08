//! The GGUF-file `ModelSource`: config from metadata, tensors read one at a time (seek +
//! read), dequantized to f32 or converted to Q4 g64 (Q4_1 pairs kept bit-exactly).
//!
//! llama.cpp's converter permutes the rows of `attn_q` / `attn_k` of *llama* models for its
//! interleaved RoPE; we undo that on read so every architecture uses HF's layout (neox RoPE).

use super::gguf::{Gguf, TensorInfo};
use super::gguf_dequant::dequantize;
use super::source::{matrix_dims, ModelSource, SourceTensor};
use crate::config::{Arch, ModelConfig};
use crate::error::{Error, Result};
use crate::quant::{MergeStats, Q4Tensor, Q8Tensor};
use crate::tokenizer::Tokenizer;
use std::fs::File;
use std::path::{Path, PathBuf};

pub struct GgufSource {
    path: PathBuf,
    gguf: Gguf,
    file: File,
    config: ModelConfig,
    tensors: Vec<SourceTensor>,
}

impl GgufSource {
    pub fn open(path: &Path) -> Result<GgufSource> {
        let (gguf, file) = Gguf::open(path)?;
        let config = ModelConfig::from_gguf(&gguf, gguf.tensor("output.weight").is_some())?;
        let mut tensors = Vec::with_capacity(gguf.tensors.len());
        for t in &gguf.tensors {
            tensors.push(SourceTensor {
                name: t.name.clone(),
                shape: t.shape(),
                dtype: t.ty.name().to_string(),
                bytes: t.ty.bytes_for(t.n_elements())?,
            });
        }
        Ok(GgufSource {
            path: path.to_path_buf(),
            gguf,
            file,
            config,
            tensors,
        })
    }

    pub fn gguf(&self) -> &Gguf {
        &self.gguf
    }

    fn info(&self, name: &str) -> Result<TensorInfo> {
        self.gguf
            .tensor(name)
            .cloned()
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    /// The tensor's raw bytes, with llama's q/k row permutation undone.
    fn raw(&mut self, t: &TensorInfo) -> Result<Vec<u8>> {
        let bytes = self.gguf.read_tensor_bytes(&mut self.file, t)?;
        let Some(heads) = permuted_heads(&self.config, &t.name) else {
            return Ok(bytes);
        };
        let rows = t.shape().first().copied().unwrap_or(0);
        Ok(unpermute_rows(&bytes, rows, heads))
    }
}

/// The head count of a tensor whose rows llama.cpp permuted (llama's `attn_q` / `attn_k`),
/// `None` for every other tensor.
pub(crate) fn permuted_heads(config: &ModelConfig, name: &str) -> Option<usize> {
    match (config.arch, name.rsplit('.').nth(1)) {
        (Arch::Llama, Some("attn_q")) => Some(config.n_heads),
        (Arch::Llama, Some("attn_k")) => Some(config.n_kv_heads),
        _ => None,
    }
}

/// Undo llama.cpp's `permute(w, n_head)`: within each head, GGUF row `2i + j` holds HF row
/// `j·(head_dim/2) + i`. Rows move whole, so quantized blocks are untouched.
pub(crate) fn unpermute_rows(bytes: &[u8], rows: usize, heads: usize) -> Vec<u8> {
    if rows == 0 || heads == 0 || !rows.is_multiple_of(2 * heads) {
        return bytes.to_vec();
    }
    let row_bytes = bytes.len() / rows;
    let hd = rows / heads;
    let half = hd / 2;
    let mut out = vec![0u8; bytes.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let src = h * hd + 2 * i + j;
                let dst = h * hd + j * half + i;
                out[dst * row_bytes..(dst + 1) * row_bytes]
                    .copy_from_slice(&bytes[src * row_bytes..(src + 1) * row_bytes]);
            }
        }
    }
    out
}

impl ModelSource for GgufSource {
    fn config(&self) -> &ModelConfig {
        &self.config
    }
    fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }
    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        let t = self.info(name)?;
        let bytes = self.raw(&t)?;
        dequantize(t.ty, &bytes, t.n_elements() as usize)
    }
    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)> {
        let t = self.info(name)?;
        let (rows, cols) = matrix_dims(name, &t.shape())?;
        let bytes = self.raw(&t)?;
        Q4Tensor::from_ggml(t.ty, &bytes, rows, cols)
    }
    fn read_q8(&mut self, name: &str) -> Result<(Q8Tensor, MergeStats)> {
        let t = self.info(name)?;
        let (rows, cols) = matrix_dims(name, &t.shape())?;
        let bytes = self.raw(&t)?;
        Q8Tensor::from_ggml(t.ty, &bytes, rows, cols)
    }
    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        if self.gguf.get("tokenizer.ggml.tokens").is_none() {
            return Ok(None);
        }
        Ok(Some(Tokenizer::from_gguf(&self.gguf)?.to_hf_json()))
    }
    fn pooling(&self) -> Option<super::pooling::Pooling> {
        super::pooling::Pooling::from_gguf(&self.gguf)
    }
    fn chat_template(&self) -> Option<String> {
        self.gguf
            .get_str("tokenizer.chat_template")
            .map(str::to_string)
    }
    fn container(&self) -> String {
        format!("GGUF v{} ({})", self.gguf.version, self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_llama_cpp_permute() {
        // 2 heads × head_dim 4, one byte per row: HF rows 0..8.
        let hf: Vec<u8> = (0..8).collect();
        // llama.cpp permute: reshape(heads, 2, hd/2).swapaxes(1, 2)
        let mut gguf = vec![0u8; 8];
        for h in 0..2 {
            for i in 0..2 {
                for j in 0..2 {
                    gguf[h * 4 + 2 * i + j] = hf[h * 4 + j * 2 + i];
                }
            }
        }
        assert_eq!(unpermute_rows(&gguf, 8, 2), hf);
    }
}
