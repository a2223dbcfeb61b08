//! Streaming a pocket package into memory for the CPU backends (the browser loader's
//! CPU path): every tensor part gets a buffer of its exact size up front, shard bytes are
//! copied to their places as they arrive ([`StreamedTensors::write`], in any shard order),
//! and the filled buffers are then a [`ModelSource`] that hands each tensor over once
//! (its bytes are freed as the model takes it, so the package is never held twice).
//!
//! Like the GPU upload, written bytes are unverified until the shard's
//! [`ShardReader::finish`](crate::format::package::ShardReader::finish) succeeds; a shard
//! that fails is written again (the same bytes land at the same places).

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::package::{Chunk, DType, Manifest};
use crate::format::source::{
    f16_from_le, f32_from_le, matrix_dims, quantize_counted, quantize_q8_counted, ModelSource,
    SourceTensor,
};
use crate::quant::{MergeStats, Q4Tensor, Q8Tensor};

/// A package's tensors, filled from shard chunks.
pub struct StreamedTensors {
    manifest: Manifest,
    tensors: Vec<SourceTensor>,
    /// Per manifest tensor, per part: the part's bytes (empty once handed over).
    parts: Vec<Vec<Vec<u8>>>,
    /// Per manifest tensor: handed over already.
    taken: Vec<bool>,
}

impl StreamedTensors {
    /// Zeroed buffers for every tensor part of `manifest` (validated first).
    pub fn new(manifest: &Manifest) -> Result<StreamedTensors> {
        manifest.validate()?;
        Ok(Self::of_table(manifest))
    }

    /// Zeroed buffers for a tensor table the engine made itself, with no shards behind it
    /// (the browser's GGUF converter: `GgufStream::manifest`), so not validated as a
    /// package's.
    pub fn of_table(manifest: &Manifest) -> StreamedTensors {
        let tensors = manifest
            .tensors
            .iter()
            .map(|t| SourceTensor {
                name: t.name.clone(),
                shape: t.shape.clone(),
                dtype: t.dtype.name().to_string(),
                bytes: t.bytes(),
            })
            .collect();
        let parts = manifest
            .tensors
            .iter()
            .map(|t| {
                t.parts
                    .iter()
                    .map(|p| vec![0u8; p.bytes as usize])
                    .collect()
            })
            .collect();
        StreamedTensors {
            manifest: manifest.clone(),
            tensors,
            taken: vec![false; manifest.tensors.len()],
            parts,
        }
    }

    /// Copy a chunk (as a [`ShardReader`](crate::format::package::ShardReader) of the same
    /// manifest emits it) to its place.
    pub fn write(&mut self, c: Chunk<'_>) -> Result<()> {
        let out_of_range = || {
            Error::Manifest(format!(
                "chunk of tensor {} part {} at {} (+{} bytes) lies outside the package",
                c.tensor,
                c.part,
                c.offset,
                c.bytes.len()
            ))
        };
        let part = self
            .parts
            .get_mut(c.tensor)
            .and_then(|t| t.get_mut(c.part))
            .ok_or_else(out_of_range)?;
        let start = usize::try_from(c.offset).map_err(|_| out_of_range())?;
        part.get_mut(start..start + c.bytes.len())
            .ok_or_else(out_of_range)?
            .copy_from_slice(c.bytes);
        Ok(())
    }

    /// Bytes held (all parts not yet handed over).
    pub fn bytes(&self) -> u64 {
        self.parts.iter().flatten().map(|p| p.len() as u64).sum()
    }

    /// Hand over tensor `name`: its entry and part buffers (once).
    fn take(&mut self, name: &str) -> Result<(DType, Vec<usize>, Vec<Vec<u8>>)> {
        let index = self
            .manifest
            .tensors
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))?;
        if std::mem::replace(&mut self.taken[index], true) {
            return Err(Error::InvalidArgument(format!(
                "tensor {name} was read already (a streamed package hands each tensor over once)"
            )));
        }
        let t = &self.manifest.tensors[index];
        Ok((
            t.dtype,
            t.shape.clone(),
            std::mem::take(&mut self.parts[index]),
        ))
    }
}

/// The bytes of part `name` among `parts` (in the manifest's part order).
fn part<'a>(
    manifest: &Manifest,
    tensor: &str,
    parts: &'a [Vec<u8>],
    name: &str,
) -> Result<&'a [u8]> {
    let entry = manifest.tensor(tensor).expect("taken tensors exist");
    entry
        .parts
        .iter()
        .position(|p| p.name == name)
        .map(|i| parts[i].as_slice())
        .ok_or_else(|| Error::Manifest(format!("tensor {tensor} has no {name} part")))
}

impl ModelSource for StreamedTensors {
    fn config(&self) -> &ModelConfig {
        &self.manifest.config
    }
    fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }
    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        let (dtype, shape, parts) = self.take(name)?;
        self.values(name, dtype, &shape, &parts)
    }
    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)> {
        let (dtype, shape, parts) = self.take(name)?;
        if dtype == DType::Q4g64 {
            let q = self.q4_of(name, &shape, &parts)?;
            let groups = q.qparams.len();
            return Ok((q, MergeStats::exact(groups)));
        }
        let (rows, cols) = matrix_dims(name, &shape)?;
        quantize_counted(&self.values(name, dtype, &shape, &parts)?, rows, cols)
    }
    fn read_q8(&mut self, name: &str) -> Result<(Q8Tensor, MergeStats)> {
        let (dtype, shape, parts) = self.take(name)?;
        if dtype == DType::Q8g32 {
            let q = self.q8_of(name, &shape, &parts)?;
            let groups = q.groups();
            return Ok((q, MergeStats::exact(groups)));
        }
        let (rows, cols) = matrix_dims(name, &shape)?;
        quantize_q8_counted(&self.values(name, dtype, &shape, &parts)?, rows, cols)
    }
    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        // The tokenizer is a separate file of the package; the loader fetches it.
        Ok(None)
    }
    fn chat_template(&self) -> Option<String> {
        self.manifest.chat_template.clone()
    }
    fn pooling(&self) -> Option<crate::format::Pooling> {
        self.manifest.pooling
    }
    fn container(&self) -> String {
        match self.manifest.shards.len() {
            0 => "streamed GGUF (converted)".into(),
            n => format!("streamed pocket package ({n} shards)"),
        }
    }
}

impl StreamedTensors {
    /// A handed-over tensor's values as f32 (dequantized when stored quantized).
    fn values(
        &self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        parts: &[Vec<u8>],
    ) -> Result<Vec<f32>> {
        match dtype {
            DType::F32 => Ok(f32_from_le(part(&self.manifest, name, parts, "data")?)),
            DType::F16 => Ok(f16_from_le(part(&self.manifest, name, parts, "data")?)),
            DType::Q4g64 => Ok(self.q4_of(name, shape, parts)?.dequantize()),
            DType::Q8g32 => Ok(self.q8_of(name, shape, parts)?.dequantize()),
        }
    }

    fn q4_of(&self, name: &str, shape: &[usize], parts: &[Vec<u8>]) -> Result<Q4Tensor> {
        let (rows, cols) = matrix_dims(name, shape)?;
        let codes = part(&self.manifest, name, parts, "codes")?;
        let params = part(&self.manifest, name, parts, "qparams")?;
        Q4Tensor::from_parts(rows, cols, codes, params)
    }

    fn q8_of(&self, name: &str, shape: &[usize], parts: &[Vec<u8>]) -> Result<Q8Tensor> {
        let (rows, cols) = matrix_dims(name, shape)?;
        let codes = part(&self.manifest, name, parts, "codes")?;
        let scales = part(&self.manifest, name, parts, "scales")?;
        Q8Tensor::from_parts(rows, cols, codes, scales)
    }
}

#[cfg(test)]
mod tests;
