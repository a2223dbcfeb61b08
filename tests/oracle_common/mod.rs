//! Shared by the oracle tests: reading the golden fixtures in tests/fixtures/oracle/.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use pocketrt::format::safetensors::HfSource;

pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(name)
}

/// A fixture model (config.json + f32 model.safetensors), read by the product's HF
/// reader (HF names → canonical names).
pub fn load_hf_fixture(name: &str) -> HfSource {
    HfSource::open(&fixture_dir(name)).unwrap()
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
        logits: flat
            .chunks(shape[1] as usize)
            .map(<[f32]>::to_vec)
            .collect(),
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
