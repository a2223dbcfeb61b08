//! Shared by the oracle tests: reading the golden fixtures in tests/fixtures/oracle/.
//!
//! `load_hf_fixture` is a deliberately small HF loader (f32 safetensors + config.json →
//! canonical names → `MemorySource`), so these tests do not depend on the product's
//! safetensors reader; it only accepts what make_fixtures.py writes.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use pocketrt::cpu::MemorySource;
use pocketrt::ModelConfig;

pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(name)
}

/// HF tensor name → llama.cpp canonical name.
pub fn canonical_name(hf: &str) -> Option<String> {
    let fixed = match hf {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, part) = rest.split_once('.')?;
    let canonical = match part {
        "input_layernorm.weight" => "attn_norm.weight",
        "post_attention_layernorm.weight" => "ffn_norm.weight",
        "self_attn.q_proj.weight" => "attn_q.weight",
        "self_attn.k_proj.weight" => "attn_k.weight",
        "self_attn.v_proj.weight" => "attn_v.weight",
        "self_attn.q_proj.bias" => "attn_q.bias",
        "self_attn.k_proj.bias" => "attn_k.bias",
        "self_attn.v_proj.bias" => "attn_v.bias",
        "self_attn.o_proj.weight" => "attn_output.weight",
        "self_attn.q_norm.weight" => "attn_q_norm.weight",
        "self_attn.k_norm.weight" => "attn_k_norm.weight",
        "mlp.gate_proj.weight" => "ffn_gate.weight",
        "mlp.up_proj.weight" => "ffn_up.weight",
        "mlp.down_proj.weight" => "ffn_down.weight",
        _ => return None,
    };
    Some(format!("blk.{layer}.{canonical}"))
}

/// A fixture model (config.json + f32 model.safetensors) as a `MemorySource`.
pub fn load_hf_fixture(name: &str) -> MemorySource {
    let dir = fixture_dir(name);
    let config_text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let config = ModelConfig::from_hf_json(&config_text).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let data = &bytes[8 + header_len..];
    let mut src = MemorySource::new(config);
    for (hf_name, info) in header.as_object().unwrap() {
        if hf_name == "__metadata__" {
            continue;
        }
        assert_eq!(info["dtype"], "F32", "{hf_name}: fixtures are f32");
        let name = canonical_name(hf_name).unwrap_or_else(|| panic!("unknown tensor {hf_name}"));
        let shape: Vec<usize> = info["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let offsets = info["data_offsets"].as_array().unwrap();
        let (start, end) = (
            offsets[0].as_u64().unwrap() as usize,
            offsets[1].as_u64().unwrap() as usize,
        );
        let values = read_f32_le(&data[start..end]);
        src.insert(&name, shape, values).unwrap();
    }
    src
}

pub fn read_f32_le(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// What make_fixtures.py recorded from transformers for one model.
pub struct Expected {
    pub tokens: Vec<u32>,
    /// `[position][vocab]`
    pub logits: Vec<Vec<f32>>,
    pub greedy: Vec<u32>,
    pub versions: String,
}

pub fn load_expected(name: &str) -> Expected {
    let dir = fixture_dir(name);
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ids = |key: &str| -> Vec<u32> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let shape = ids("logits_shape");
    let flat = read_f32_le(&std::fs::read(dir.join("logits.bin")).unwrap());
    assert_eq!(flat.len(), (shape[0] * shape[1]) as usize);
    Expected {
        tokens: ids("tokens"),
        logits: flat.chunks(shape[1] as usize).map(<[f32]>::to_vec).collect(),
        greedy: ids("greedy"),
        versions: format!("torch {}, transformers {}", v["torch"], v["transformers"]),
    }
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
