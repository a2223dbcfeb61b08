//! `ModelConfig`: everything the forward pass needs to know about a model, read from an HF
//! `config.json` (Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM) or from GGUF
//! metadata (`qwen3.*`, `qwen2.*`, `llama.*` keys and `tokenizer.ggml.*` ids).

use crate::error::{Error, Result};
use crate::format::gguf::Gguf;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    Qwen3,
    Qwen2,
    Llama,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Qwen3 => "qwen3",
            Arch::Qwen2 => "qwen2",
            Arch::Llama => "llama",
        }
    }

    fn from_name(what: &str, name: &str) -> Result<Arch> {
        match name {
            "qwen3" | "Qwen3ForCausalLM" => Ok(Arch::Qwen3),
            "qwen2" | "Qwen2ForCausalLM" => Ok(Arch::Qwen2),
            "llama" | "LlamaForCausalLM" => Ok(Arch::Llama),
            _ => Err(Error::Unsupported {
                what: what.into(),
                kind: "architecture",
                name: name.into(),
                supported: "qwen3, qwen2, llama",
            }),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub arch: Arch,
    pub hidden_size: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn_size: usize,
    pub vocab_size: usize,
    pub rope_theta: f32,
    pub rms_eps: f32,
    /// Context length the model was trained for (from its metadata).
    pub max_context: usize,
    /// The LM head is the token embedding.
    pub tie_embeddings: bool,
    /// Bias on the q/k/v projections (qwen2).
    pub qkv_bias: bool,
    /// Per-head RMSNorm on q and k (qwen3).
    pub qk_norm: bool,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
    pub pad_token_id: Option<u32>,
}

/// Upper bounds that no real model reaches: larger values mean a corrupt file, and are
/// rejected before anything is allocated from them.
const MAX_DIM: usize = 1 << 20;
const MAX_LAYERS: usize = 1024;

impl ModelConfig {
    /// Every shape a decode step's cost depends on, as one string (the key decisions
    /// about a model on a device are kept under: `engine::probe`, `gpu::tune`).
    pub fn shape_key(&self) -> String {
        format!(
            "{:?}|h{}|l{}|q{}|kv{}|d{}|f{}|v{}|t{}",
            self.arch,
            self.hidden_size,
            self.n_layers,
            self.n_heads,
            self.n_kv_heads,
            self.head_dim,
            self.ffn_size,
            self.vocab_size,
            self.tie_embeddings
        )
    }

    /// From an HF `config.json`.
    pub fn from_hf_json(text: &str) -> Result<ModelConfig> {
        let what = "config.json";
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::corrupt(what, e.to_string()))?;
        let arch_name = v["architectures"][0]
            .as_str()
            .or_else(|| v["model_type"].as_str())
            .ok_or_else(|| Error::missing(what, "architectures"))?;
        let arch = Arch::from_name(what, arch_name)?;
        let num = |key: &str| -> Result<usize> {
            v[key]
                .as_u64()
                .map(|x| x as usize)
                .ok_or_else(|| Error::missing(what, key))
        };
        let hidden_size = num("hidden_size")?;
        let n_heads = num("num_attention_heads")?;
        let ids = |key: &str| -> Vec<u32> {
            match &v[key] {
                serde_json::Value::Number(n) => {
                    n.as_u64().map(|x| vec![x as u32]).unwrap_or_default()
                }
                serde_json::Value::Array(a) => a
                    .iter()
                    .filter_map(|x| x.as_u64())
                    .map(|x| x as u32)
                    .collect(),
                _ => vec![],
            }
        };
        let cfg = ModelConfig {
            arch,
            hidden_size,
            n_layers: num("num_hidden_layers")?,
            n_heads,
            n_kv_heads: v["num_key_value_heads"]
                .as_u64()
                .map(|x| x as usize)
                .unwrap_or(n_heads),
            head_dim: match v["head_dim"].as_u64() {
                Some(h) => h as usize,
                None if n_heads > 0 => hidden_size / n_heads,
                None => return Err(Error::missing(what, "head_dim")),
            },
            ffn_size: num("intermediate_size")?,
            vocab_size: num("vocab_size")?,
            // transformers ≥ 5 writes `rope_parameters: {rope_theta, rope_type}`.
            rope_theta: v["rope_theta"]
                .as_f64()
                .or_else(|| v["rope_parameters"]["rope_theta"].as_f64())
                .unwrap_or(10_000.0) as f32,
            rms_eps: v["rms_norm_eps"].as_f64().unwrap_or(1e-6) as f32,
            max_context: v["max_position_embeddings"].as_u64().unwrap_or(4096) as usize,
            tie_embeddings: v["tie_word_embeddings"].as_bool().unwrap_or(false),
            qkv_bias: match arch {
                Arch::Qwen2 => true,
                _ => v["attention_bias"].as_bool().unwrap_or(false),
            },
            qk_norm: arch == Arch::Qwen3,
            bos_token_id: ids("bos_token_id").first().copied(),
            eos_token_ids: ids("eos_token_id"),
            pad_token_id: ids("pad_token_id").first().copied(),
        };
        cfg.validate(what)?;
        Ok(cfg)
    }

    /// From GGUF metadata. `has_output` tells whether the file holds a separate
    /// `output.weight` (an untied LM head).
    pub fn from_gguf(g: &Gguf, has_output: bool) -> Result<ModelConfig> {
        let what = "GGUF metadata";
        let arch_name = g
            .get_str("general.architecture")
            .ok_or_else(|| Error::missing(what, "general.architecture"))?;
        let arch = Arch::from_name(what, arch_name)?;
        let p = arch.name();
        let num = |key: &str| -> Result<usize> {
            let full = format!("{p}.{key}");
            g.get_u64(&full)
                .map(|x| x as usize)
                .ok_or_else(|| Error::missing(what, full))
        };
        let hidden_size = num("embedding_length")?;
        let n_heads = num("attention.head_count")?;
        let head_dim = match g.get_u64(&format!("{p}.attention.key_length")) {
            Some(h) => h as usize,
            None if n_heads > 0 => hidden_size / n_heads,
            None => return Err(Error::missing(what, format!("{p}.attention.key_length"))),
        };
        let vocab_size = match g.get_u64(&format!("{p}.vocab_size")) {
            Some(n) => n as usize,
            None => g
                .get("tokenizer.ggml.tokens")
                .and_then(|t| t.as_array())
                .map(|a| a.len())
                .or_else(|| {
                    g.tensor("token_embd.weight")
                        .map(|t| t.dims.get(1).copied().unwrap_or(0) as usize)
                })
                .ok_or_else(|| Error::missing(what, "tokenizer.ggml.tokens"))?,
        };
        let id = |key: &str| g.get_u64(key).map(|x| x as u32);
        let cfg = ModelConfig {
            arch,
            hidden_size,
            n_layers: num("block_count")?,
            n_heads,
            n_kv_heads: g
                .get_u64(&format!("{p}.attention.head_count_kv"))
                .map(|x| x as usize)
                .unwrap_or(n_heads),
            head_dim,
            ffn_size: num("feed_forward_length")?,
            vocab_size,
            rope_theta: g
                .get_f64(&format!("{p}.rope.freq_base"))
                .unwrap_or(10_000.0) as f32,
            rms_eps: g
                .get_f64(&format!("{p}.attention.layer_norm_rms_epsilon"))
                .unwrap_or(1e-6) as f32,
            max_context: num("context_length").unwrap_or(4096),
            tie_embeddings: !has_output,
            qkv_bias: arch == Arch::Qwen2,
            qk_norm: arch == Arch::Qwen3,
            bos_token_id: match g.get("tokenizer.ggml.add_bos_token") {
                Some(crate::format::gguf::MetaValue::Bool(false)) => None,
                _ if arch == Arch::Llama => id("tokenizer.ggml.bos_token_id"),
                Some(crate::format::gguf::MetaValue::Bool(true)) => {
                    id("tokenizer.ggml.bos_token_id")
                }
                _ => None,
            },
            eos_token_ids: id("tokenizer.ggml.eos_token_id").into_iter().collect(),
            pad_token_id: id("tokenizer.ggml.padding_token_id"),
        };
        cfg.validate(what)?;
        Ok(cfg)
    }

    /// Reject shapes that are impossible or absurd before anything is allocated from them.
    pub fn validate(&self, what: &str) -> Result<()> {
        let bad = |detail: String| Err(Error::corrupt(what, detail));
        for (name, v, max) in [
            ("hidden_size", self.hidden_size, MAX_DIM),
            ("n_layers", self.n_layers, MAX_LAYERS),
            ("n_heads", self.n_heads, 4096),
            ("n_kv_heads", self.n_kv_heads, 4096),
            ("head_dim", self.head_dim, 4096),
            ("ffn_size", self.ffn_size, MAX_DIM),
            ("vocab_size", self.vocab_size, 1 << 24),
        ] {
            if v == 0 || v > max {
                return bad(format!("{name} = {v} is outside 1..={max}"));
            }
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return bad(format!(
                "{} heads are not a multiple of {} KV heads",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return bad(format!(
                "head_dim {} is odd (RoPE needs pairs)",
                self.head_dim
            ));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return bad(format!(
                "rope theta {} is not a positive number",
                self.rope_theta
            ));
        }
        if !(self.rms_eps.is_finite() && self.rms_eps >= 0.0) {
            return bad(format!(
                "rms eps {} is not a non-negative number",
                self.rms_eps
            ));
        }
        Ok(())
    }

    /// Width of the q projection output.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of each of the k and v projection outputs.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// The tensors a model of this config holds: (canonical name, row-major shape).
    /// Canonical names are llama.cpp's (`blk.N.attn_q.weight`, …).
    pub fn expected_tensors(&self) -> Vec<(String, Vec<usize>)> {
        let (h, f, v) = (self.hidden_size, self.ffn_size, self.vocab_size);
        let mut out = vec![("token_embd.weight".to_string(), vec![v, h])];
        for i in 0..self.n_layers {
            let b = |s: &str| format!("blk.{i}.{s}");
            out.push((b("attn_norm.weight"), vec![h]));
            out.push((b("attn_q.weight"), vec![self.q_dim(), h]));
            out.push((b("attn_k.weight"), vec![self.kv_dim(), h]));
            out.push((b("attn_v.weight"), vec![self.kv_dim(), h]));
            if self.qkv_bias {
                out.push((b("attn_q.bias"), vec![self.q_dim()]));
                out.push((b("attn_k.bias"), vec![self.kv_dim()]));
                out.push((b("attn_v.bias"), vec![self.kv_dim()]));
            }
            if self.qk_norm {
                out.push((b("attn_q_norm.weight"), vec![self.head_dim]));
                out.push((b("attn_k_norm.weight"), vec![self.head_dim]));
            }
            out.push((b("attn_output.weight"), vec![h, self.q_dim()]));
            out.push((b("ffn_norm.weight"), vec![h]));
            out.push((b("ffn_gate.weight"), vec![f, h]));
            out.push((b("ffn_up.weight"), vec![f, h]));
            out.push((b("ffn_down.weight"), vec![h, f]));
        }
        out.push(("output_norm.weight".to_string(), vec![h]));
        if !self.tie_embeddings {
            out.push(("output.weight".to_string(), vec![v, h]));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN3: &str = r#"{"architectures":["Qwen3ForCausalLM"],"hidden_size":896,
        "num_hidden_layers":28,"num_attention_heads":14,"num_key_value_heads":2,"head_dim":64,
        "intermediate_size":2560,"vocab_size":65536,"rope_theta":1000000.0,"rms_norm_eps":1e-6,
        "max_position_embeddings":40960,"tie_word_embeddings":true,"eos_token_id":65512}"#;

    #[test]
    fn qwen3_config_json_gives_pocket_shape() {
        let c = ModelConfig::from_hf_json(QWEN3).unwrap();
        assert_eq!(c.arch, Arch::Qwen3);
        assert_eq!((c.hidden_size, c.n_layers, c.ffn_size), (896, 28, 2560));
        assert_eq!((c.n_heads, c.n_kv_heads, c.head_dim), (14, 2, 64));
        assert!(c.qk_norm && c.tie_embeddings && !c.qkv_bias);
        assert_eq!(c.eos_token_ids, vec![65512]);
        // tied: no output.weight; qk-norm: two extra tensors per layer
        let t = c.expected_tensors();
        assert_eq!(t.len(), 1 + 28 * 11 + 1);
    }

    #[test]
    fn rope_theta_is_read_from_transformers_5_rope_parameters() {
        let v5 = QWEN3.replace(
            "\"rope_theta\":1000000.0",
            "\"rope_parameters\":{\"rope_theta\":50000.0,\"rope_type\":\"default\"}",
        );
        assert_eq!(ModelConfig::from_hf_json(&v5).unwrap().rope_theta, 50000.0);
    }

    #[test]
    fn absurd_shapes_are_rejected() {
        let bad = QWEN3.replace("\"num_key_value_heads\":2", "\"num_key_value_heads\":3");
        assert!(matches!(
            ModelConfig::from_hf_json(&bad),
            Err(Error::CorruptModel { .. })
        ));
        let huge = QWEN3.replace("\"hidden_size\":896", "\"hidden_size\":99999999999");
        assert!(matches!(
            ModelConfig::from_hf_json(&huge),
            Err(Error::CorruptModel { .. })
        ));
        let unknown = QWEN3.replace("Qwen3ForCausalLM", "GPTNeoXForCausalLM");
        assert!(matches!(
            ModelConfig::from_hf_json(&unknown),
            Err(Error::Unsupported { .. })
        ));
        let missing = QWEN3.replace("\"intermediate_size\":2560,", "");
        assert!(matches!(
            ModelConfig::from_hf_json(&missing),
            Err(Error::MissingField { .. })
        ));
    }
}
