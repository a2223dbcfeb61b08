//! Synthetic models: the exact shapes of a real model (MNN-Pocket-0.3B first of all) with
//! seeded random weights, so that benchmarks and tests need no download.
//!
//! [`SynthSource`] is a [`ModelSource`]: every matrix is generated as Q4_1 the way the
//! published Pocket GGUF stores it (each g64 group as two g32 blocks with equal (d, m)),
//! so the package written from it ([`write_package`], through the converter) keeps every
//! code bit-exactly, and [`write_gguf`] writes the very same bytes as a GGUF file.
//!
//! Scales: a matrix with K inputs holds values uniform in about ±sqrt(3/K) (unit-variance
//! outputs for unit-variance inputs); norm weights are near 1, biases small. With RMSNorm
//! before every projection the logits stay finite and of order one.

use crate::config::ModelConfig;
use crate::convert::{convert, ConvertOptions, ConvertReport};
use crate::error::{Error, Result};
use crate::format::gguf::{GgmlType, MetaValue};
use crate::format::gguf_write::GgufWriter;
use crate::format::source::{matrix_dims, ModelSource, SourceTensor};
use crate::quant::{MergeStats, Q4Tensor};
use std::path::Path;

/// Preset names accepted by [`preset`].
pub const PRESETS: [&str; 4] = ["pocket-0.3b", "tiny-qwen3", "tiny-qwen2", "tiny-llama"];

/// The config of a named preset: `pocket-0.3b` has MNN-Pocket-0.3B's exact shapes (qwen3,
/// 896 / 28 layers / 2560, 14 / 2 heads of 64, vocab 65,536, tied head); the `tiny-*`
/// presets are small models of each architecture for tests.
pub fn preset(name: &str) -> Result<ModelConfig> {
    let json = match name {
        "pocket-0.3b" => {
            r#"{"architectures":["Qwen3ForCausalLM"],"hidden_size":896,"num_hidden_layers":28,
            "num_attention_heads":14,"num_key_value_heads":2,"head_dim":64,
            "intermediate_size":2560,"vocab_size":65536,"rope_theta":1000000.0,
            "rms_norm_eps":1e-6,"max_position_embeddings":40960,"tie_word_embeddings":true,
            "eos_token_id":65512}"#
        }
        "tiny-qwen3" => {
            r#"{"architectures":["Qwen3ForCausalLM"],"hidden_size":128,"num_hidden_layers":2,
            "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
            "intermediate_size":256,"vocab_size":1000,"rope_theta":1000000.0,
            "rms_norm_eps":1e-6,"max_position_embeddings":512,"tie_word_embeddings":true,
            "eos_token_id":999}"#
        }
        "tiny-qwen2" => {
            r#"{"architectures":["Qwen2ForCausalLM"],"hidden_size":128,"num_hidden_layers":2,
            "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":320,
            "vocab_size":1000,"rope_theta":1000000.0,"rms_norm_eps":1e-6,
            "max_position_embeddings":512,"tie_word_embeddings":false,"eos_token_id":999}"#
        }
        "tiny-llama" => {
            r#"{"architectures":["LlamaForCausalLM"],"hidden_size":192,"num_hidden_layers":2,
            "num_attention_heads":6,"num_key_value_heads":3,"intermediate_size":384,
            "vocab_size":1000,"rope_theta":10000.0,"rms_norm_eps":1e-5,
            "max_position_embeddings":512,"tie_word_embeddings":false,"eos_token_id":999}"#
        }
        other => {
            return Err(Error::Unsupported {
                what: "synth".into(),
                kind: "preset",
                name: other.into(),
                supported: "pocket-0.3b, tiny-qwen3, tiny-qwen2, tiny-llama",
            })
        }
    };
    ModelConfig::from_hf_json(json)
}

/// xorshift64*: reproducible random bytes without a dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A seed per tensor: FNV-1a of its name, mixed with the model seed.
fn tensor_seed(seed: u64, name: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Q4_1 bytes of a `rows × cols` matrix where both g32 blocks of every g64 group share
/// (d, m): values uniform in about `[-amp, amp]` (d and m vary a little per group).
pub fn q4_1_pairs(rows: usize, cols: usize, amp: f32, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows * cols / 32 * 20);
    for _ in 0..rows * cols / 64 {
        let a = amp * (0.75 + 0.5 * rng.unit());
        let d = half::f16::from_f32(2.0 * a / 15.0).to_bits();
        let m = half::f16::from_f32(-a).to_bits();
        for _ in 0..2 {
            out.extend_from_slice(&d.to_le_bytes());
            out.extend_from_slice(&m.to_le_bytes());
            for _ in 0..2 {
                out.extend_from_slice(&rng.next_u64().to_le_bytes());
            }
        }
    }
    out
}

/// A model of `config` with random weights, generated on demand from `seed` (each tensor
/// from its own seed, so reading order does not matter).
pub struct SynthSource {
    config: ModelConfig,
    tensors: Vec<SourceTensor>,
    seed: u64,
    tokenizer: Option<String>,
    template: Option<String>,
}

impl SynthSource {
    pub fn new(config: ModelConfig, seed: u64) -> Result<SynthSource> {
        config.validate("synthetic model")?;
        if !config.hidden_size.is_multiple_of(64)
            || !config.ffn_size.is_multiple_of(64)
            || !config.q_dim().is_multiple_of(64)
        {
            return Err(Error::InvalidArgument(format!(
                "synthetic model: hidden {}, ffn {} and q width {} must be multiples of 64 (Q4 g64)",
                config.hidden_size,
                config.ffn_size,
                config.q_dim()
            )));
        }
        let tensors = config
            .expected_tensors()
            .into_iter()
            .map(|(name, shape)| {
                let n: usize = shape.iter().product();
                let (dtype, bytes) = match shape.len() {
                    2 => ("Q4_1", n / 32 * 20),
                    _ => ("f32", 4 * n),
                };
                SourceTensor {
                    name,
                    shape,
                    dtype: dtype.into(),
                    bytes: bytes as u64,
                }
            })
            .collect();
        Ok(SynthSource {
            config,
            tensors,
            seed,
            tokenizer: None,
            template: None,
        })
    }

    /// Give the model a tokenizer (an HF tokenizer.json) and a chat template.
    pub fn with_tokenizer(mut self, json: String, template: Option<String>) -> SynthSource {
        self.tokenizer = Some(json);
        self.template = template;
        self
    }

    /// A named [`preset`].
    pub fn preset(name: &str, seed: u64) -> Result<SynthSource> {
        SynthSource::new(preset(name)?, seed)
    }

    fn find(&self, name: &str) -> Result<&SourceTensor> {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Error::MissingTensor(name.into()))
    }

    /// The Q4_1 bytes of matrix `name` (the GGUF's encoding of it).
    pub fn q4_1_bytes(&self, name: &str) -> Result<Vec<u8>> {
        let t = self.find(name)?;
        let (rows, cols) = matrix_dims(name, &t.shape)?;
        let amp = (3.0 / cols as f32).sqrt();
        Ok(q4_1_pairs(
            rows,
            cols,
            amp,
            &mut Rng::new(tensor_seed(self.seed, name)),
        ))
    }

    /// The values of vector `name`: norm weights in [0.9, 1.1], biases in ±0.05.
    pub fn vector(&self, name: &str) -> Result<Vec<f32>> {
        let t = self.find(name)?;
        if t.shape.len() != 1 {
            return Err(Error::InvalidArgument(format!("{name} is not a vector")));
        }
        let mut rng = Rng::new(tensor_seed(self.seed, name));
        let (center, spread) = if name.ends_with(".bias") {
            (0.0, 0.1)
        } else {
            (1.0, 0.2)
        };
        Ok((0..t.shape[0])
            .map(|_| center + spread * (rng.unit() - 0.5))
            .collect())
    }

    /// GGUF metadata describing the config (llama.cpp keys), as `ModelConfig::from_gguf`
    /// reads them back.
    fn gguf_metadata(&self) -> Vec<(String, MetaValue)> {
        let c = &self.config;
        let p = c.arch.name();
        let u = |v: usize| MetaValue::U32(v as u32);
        let mut m = vec![
            ("general.architecture".into(), MetaValue::String(p.into())),
            (format!("{p}.block_count"), u(c.n_layers)),
            (format!("{p}.embedding_length"), u(c.hidden_size)),
            (format!("{p}.feed_forward_length"), u(c.ffn_size)),
            (format!("{p}.attention.head_count"), u(c.n_heads)),
            (format!("{p}.attention.head_count_kv"), u(c.n_kv_heads)),
            (format!("{p}.attention.key_length"), u(c.head_dim)),
            (format!("{p}.vocab_size"), u(c.vocab_size)),
            (format!("{p}.context_length"), u(c.max_context)),
            (format!("{p}.rope.freq_base"), MetaValue::F32(c.rope_theta)),
            (
                format!("{p}.attention.layer_norm_rms_epsilon"),
                MetaValue::F32(c.rms_eps),
            ),
        ];
        if let Some(&eos) = c.eos_token_ids.first() {
            m.push(("tokenizer.ggml.eos_token_id".into(), MetaValue::U32(eos)));
        }
        m
    }

    /// The whole model as a GGUF writer (matrices Q4_1, vectors f32); holds every tensor
    /// in memory (~192 MB for pocket-0.3b).
    pub fn gguf_writer(&self) -> Result<GgufWriter> {
        self.gguf_writer_with_q8_0(&[])
    }

    /// [`SynthSource::gguf_writer`] with the matrices named in `q8_0` as Q8_0 (their
    /// values quantized by ggml's Q8_0 rounding): a GGUF of mixed types, as a Q4_K_M
    /// file's.
    pub fn gguf_writer_with_q8_0(&self, q8_0: &[&str]) -> Result<GgufWriter> {
        let mut w = GgufWriter::new();
        for (k, v) in self.gguf_metadata() {
            w.meta(&k, v);
        }
        for t in &self.tensors {
            // ggml order: innermost dimension first.
            let dims: Vec<u64> = t.shape.iter().rev().map(|&d| d as u64).collect();
            if t.shape.len() == 2 && q8_0.contains(&t.name.as_str()) {
                let (rows, cols) = (t.shape[0], t.shape[1]);
                let q4_1 = self.q4_1_bytes(&t.name)?;
                let values =
                    crate::format::gguf_dequant::dequantize(GgmlType::Q4_1, &q4_1, rows * cols)?;
                let q = crate::quant::Q8Tensor::quantize(&values, rows, cols)?;
                w.tensor(&t.name, &dims, GgmlType::Q8_0, &q.to_ggml_q8_0())?;
            } else if t.shape.len() == 2 {
                w.tensor(&t.name, &dims, GgmlType::Q4_1, &self.q4_1_bytes(&t.name)?)?;
            } else {
                let v = self.vector(&t.name)?;
                w.tensor(&t.name, &dims, GgmlType::F32, bytemuck::cast_slice(&v))?;
            }
        }
        Ok(w)
    }
}

impl ModelSource for SynthSource {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn identity(&self) -> Vec<u8> {
        self.seed.to_le_bytes().to_vec()
    }

    fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }

    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        let t = self.find(name)?;
        if t.shape.len() == 1 {
            return self.vector(name);
        }
        let (q, _) = self.read_q4(name)?;
        Ok(q.dequantize())
    }

    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)> {
        let t = self.find(name)?;
        let (rows, cols) = matrix_dims(name, &t.shape)?;
        Q4Tensor::from_ggml(GgmlType::Q4_1, &self.q4_1_bytes(name)?, rows, cols)
    }

    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        Ok(self.tokenizer.clone())
    }

    fn chat_template(&self) -> Option<String> {
        self.template.clone()
    }

    fn container(&self) -> String {
        "synthetic".into()
    }
}

/// Write `src` as a pocket package in `dir` (through the converter: codes bit-exact).
pub fn write_package(src: &mut SynthSource, dir: &Path) -> Result<ConvertReport> {
    convert(src, dir, &ConvertOptions::default(), &mut |_| {})
}

/// Write `src` as a Q4_1 GGUF file at `path` (the way the published Pocket GGUF is stored).
/// qwen3 and qwen2 only: llama GGUFs hold attn_q/attn_k rows permuted (llama.cpp's
/// converter), which this writer does not do.
pub fn write_gguf(src: &SynthSource, path: &Path) -> Result<()> {
    if src.config.arch == crate::config::Arch::Llama {
        return Err(Error::Unsupported {
            what: "synth --gguf".into(),
            kind: "architecture",
            name: "llama".into(),
            supported: "qwen3, qwen2 (write llama as a pocket package)",
        });
    }
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    src.gguf_writer()?.write_to(std::io::BufWriter::new(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pocket_preset_has_the_published_shapes() {
        let c = preset("pocket-0.3b").unwrap();
        assert_eq!(
            (
                c.hidden_size,
                c.n_layers,
                c.ffn_size,
                c.n_heads,
                c.n_kv_heads
            ),
            (896, 28, 2560, 14, 2)
        );
        assert_eq!((c.head_dim, c.vocab_size), (64, 65_536));
        assert!(c.tie_embeddings && c.qk_norm && !c.qkv_bias);
    }

    #[test]
    fn unknown_preset_is_a_typed_error() {
        assert!(matches!(
            preset("pocket-9b"),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn synthetic_matrices_are_seeded_bit_exact_q4_g64_of_the_stated_amplitude() {
        let mut a = SynthSource::preset("tiny-qwen2", 7).unwrap();
        let mut b = SynthSource::preset("tiny-qwen2", 7).unwrap();
        let mut c = SynthSource::preset("tiny-qwen2", 8).unwrap();
        let name = "blk.1.ffn_down.weight";
        let (qa, stats) = a.read_q4(name).unwrap();
        assert_eq!(stats.groups_requantized, 0);
        assert_eq!(qa, b.read_q4(name).unwrap().0);
        assert_ne!(qa, c.read_q4(name).unwrap().0);
        let amp = (3.0f32 / 320.0).sqrt();
        let max = qa.dequantize().iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(
            max <= 1.3 * amp && max >= 0.9 * amp,
            "max |w| {max}, amp {amp}"
        );
        let bias = a.read_f32("blk.0.attn_q.bias").unwrap();
        assert!(bias.iter().all(|v| v.abs() <= 0.05));
    }
}
