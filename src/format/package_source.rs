//! The pocket-package `ModelSource`, over [`PackageDir`] (each shard hash-checked once, the
//! first time a tensor touches it; tensors then read by seeking).

use super::package::{DType, PackageDir, TensorEntry};
use super::source::{
    f16_from_le, f32_from_le, matrix_dims, quantize_counted, quantize_q8_counted, ModelSource,
    SourceTensor,
};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::quant::{MergeStats, Q4Tensor, Q8Tensor};
use std::path::Path;

pub struct PackageSource {
    dir: PackageDir,
    tensors: Vec<SourceTensor>,
}

/// A manifest's tensors as a [`ModelSource`] lists them (also the browser's model
/// identity, which has the manifest and no source).
pub fn source_tensors(tensors: &[super::package::TensorEntry]) -> Vec<SourceTensor> {
    let entry = |t: &super::package::TensorEntry| SourceTensor {
        name: t.name.clone(),
        shape: t.shape.clone(),
        dtype: t.dtype.name().to_string(),
        bytes: t.bytes(),
    };
    tensors.iter().map(entry).collect()
}

/// A package's [`ModelSource::identity`]: its shards' hashes.
pub fn identity_bytes(m: &super::package::Manifest) -> Vec<u8> {
    m.shards.iter().flat_map(|s| s.sha256.bytes()).collect()
}

impl PackageSource {
    pub fn open(dir: &Path) -> Result<PackageSource> {
        let dir = PackageDir::open(dir)?;
        let tensors = source_tensors(&dir.manifest().tensors);
        Ok(PackageSource { dir, tensors })
    }

    pub fn manifest(&self) -> &super::package::Manifest {
        self.dir.manifest()
    }

    /// Matrix `name`'s bytes when it is stored as `dtype` (its two parts: codes, then
    /// params or scales), else only its dimensions.
    fn stored_parts(&mut self, name: &str, dtype: DType) -> Result<Stored> {
        let t = self.entry(name)?;
        let (rows, cols) = matrix_dims(name, &t.shape)?;
        if t.dtype != dtype {
            return Ok(Stored::Other(rows, cols));
        }
        let bytes = self.dir.load_tensor(name)?;
        Ok(Stored::As(rows, cols, bytes, t.parts[0].bytes as usize))
    }

    fn entry(&self, name: &str) -> Result<TensorEntry> {
        self.manifest()
            .tensor(name)
            .cloned()
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }
}

/// A matrix as [`PackageSource::stored_parts`] finds it: `(rows, cols, bytes, split)` with
/// the first part `bytes[..split]`, or `(rows, cols)` of one stored in another type.
enum Stored {
    As(usize, usize, Vec<u8>, usize),
    Other(usize, usize),
}

impl ModelSource for PackageSource {
    fn config(&self) -> &ModelConfig {
        &self.manifest().config
    }
    fn identity(&self) -> Vec<u8> {
        identity_bytes(self.manifest())
    }
    fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }
    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        let t = self.entry(name)?;
        match t.dtype {
            DType::F32 => Ok(f32_from_le(&self.dir.load_tensor(name)?)),
            DType::F16 => Ok(f16_from_le(&self.dir.load_tensor(name)?)),
            DType::Q4g64 => Ok(self.read_q4(name)?.0.dequantize()),
            DType::Q8g32 => Ok(self.read_q8(name)?.0.dequantize()),
        }
    }
    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)> {
        match self.stored_parts(name, DType::Q4g64)? {
            Stored::As(rows, cols, bytes, split) => {
                let q = Q4Tensor::from_parts(rows, cols, &bytes[..split], &bytes[split..])?;
                let groups = q.qparams.len();
                Ok((q, MergeStats::exact(groups)))
            }
            Stored::Other(rows, cols) => quantize_counted(&self.read_f32(name)?, rows, cols),
        }
    }
    fn read_q8(&mut self, name: &str) -> Result<(Q8Tensor, MergeStats)> {
        match self.stored_parts(name, DType::Q8g32)? {
            Stored::As(rows, cols, bytes, split) => {
                let q = Q8Tensor::from_parts(rows, cols, &bytes[..split], &bytes[split..])?;
                let groups = q.groups();
                Ok((q, MergeStats::exact(groups)))
            }
            Stored::Other(rows, cols) => quantize_q8_counted(&self.read_f32(name)?, rows, cols),
        }
    }
    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        self.dir.tokenizer_json()
    }
    fn chat_template(&self) -> Option<String> {
        self.manifest().chat_template.clone()
    }
    fn pooling(&self) -> Option<super::pooling::Pooling> {
        self.manifest().pooling
    }
    fn container(&self) -> String {
        format!("pocket package ({} shards)", self.manifest().shards.len())
    }
}
