//! `MemorySource`: a model held in memory as f32 tensors under canonical names — for
//! tests (random models of any config) and for sources converted in memory.

use std::collections::HashMap;

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::source::{matrix_dims, quantize_counted};
use crate::format::{ModelSource, SourceTensor};
use crate::quant::{MergeStats, Q4Tensor};

#[derive(Clone, Debug)]
pub struct MemorySource {
    config: ModelConfig,
    tensors: Vec<SourceTensor>,
    data: HashMap<String, Vec<f32>>,
    tokenizer: Option<String>,
    template: Option<String>,
}

impl MemorySource {
    /// An empty source for `config`; add tensors with [`MemorySource::insert`].
    pub fn new(config: ModelConfig) -> MemorySource {
        MemorySource {
            config,
            tensors: Vec::new(),
            data: HashMap::new(),
            tokenizer: None,
            template: None,
        }
    }

    /// Give the model a tokenizer (an HF tokenizer.json) and a chat template (what a
    /// package written from it carries).
    pub fn with_tokenizer(mut self, json: String, template: Option<String>) -> MemorySource {
        self.tokenizer = Some(json);
        self.template = template;
        self
    }

    /// Add (or replace) a tensor; `data.len()` must match the shape.
    pub fn insert(&mut self, name: &str, shape: Vec<usize>, data: Vec<f32>) -> Result<()> {
        if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(data.len()) {
            return Err(Error::ShapeMismatch {
                tensor: name.to_string(),
                expected: shape,
                found: vec![data.len()],
            });
        }
        self.tensors.retain(|t| t.name != name);
        self.tensors.push(SourceTensor {
            name: name.to_string(),
            bytes: 4 * data.len() as u64,
            shape,
            dtype: "f32".into(),
        });
        self.data.insert(name.to_string(), data);
        Ok(())
    }

    /// Remove a tensor (tests use it to check that missing tensors are reported).
    pub fn remove(&mut self, name: &str) {
        self.tensors.retain(|t| t.name != name);
        self.data.remove(name);
    }

    /// Every tensor `config` expects, filled with seeded pseudo-random values: matrices
    /// uniform in ±`scale`, norm weights around 1, biases small.
    pub fn random(config: ModelConfig, seed: u64, scale: f32) -> Result<MemorySource> {
        let mut rng = SplitMix64(seed);
        let mut src = MemorySource::new(config.clone());
        for (name, shape) in config.expected_tensors() {
            let n: usize = shape.iter().product();
            let (center, spread) = if name.contains("norm") {
                (1.0, 0.2)
            } else if name.ends_with(".bias") {
                (0.0, 0.1)
            } else {
                (0.0, scale)
            };
            let data = (0..n)
                .map(|_| center + spread * rng.signed_unit())
                .collect();
            src.insert(&name, shape, data)?;
        }
        Ok(src)
    }

    fn get(&self, name: &str) -> Result<(&SourceTensor, &Vec<f32>)> {
        let t = self.tensors.iter().find(|t| t.name == name);
        match (t, self.data.get(name)) {
            (Some(t), Some(d)) => Ok((t, d)),
            _ => Err(Error::MissingTensor(name.to_string())),
        }
    }
}

impl ModelSource for MemorySource {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }

    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        Ok(self.get(name)?.1.clone())
    }

    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)> {
        let (t, data) = self.get(name)?;
        let (rows, cols) = matrix_dims(name, &t.shape)?;
        quantize_counted(data, rows, cols)
    }

    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        Ok(self.tokenizer.clone())
    }

    fn chat_template(&self) -> Option<String> {
        self.template.clone()
    }

    fn container(&self) -> String {
        "memory".into()
    }

    /// The first values of every tensor, in name order.
    fn identity(&self) -> Vec<u8> {
        let mut names: Vec<&String> = self.data.keys().collect();
        names.sort();
        let first = |n: &&String| self.data[*n].iter().take(64).flat_map(|v| v.to_le_bytes());
        names.iter().flat_map(first).collect()
    }
}

/// SplitMix64: a tiny, well-mixed PRNG (deterministic test data without a dependency).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn signed_unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}
