//! Structural checks of the oracle on random in-memory models. The numerical proof is
//! against HF transformers and llama.cpp, in `tests/oracle_fixtures.rs` / `oracle_real.rs`.

use super::*;
use crate::config::{Arch, ModelConfig};
use crate::error::Error;
use crate::format::ModelSource;

fn config(arch: Arch, n_heads: usize, n_kv_heads: usize, tied: bool) -> ModelConfig {
    ModelConfig {
        arch,
        hidden_size: 128,
        n_layers: 2,
        n_heads,
        n_kv_heads,
        head_dim: 64,
        ffn_size: 192,
        vocab_size: 300,
        rope_theta: 1e6,
        rms_eps: 1e-6,
        max_context: 256,
        tie_embeddings: tied,
        qkv_bias: arch == Arch::Qwen2,
        qk_norm: arch == Arch::Qwen3,
        bos_token_id: None,
        eos_token_ids: vec![],
        pad_token_id: None,
    }
}

fn logits_of(model: &Model, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut cache = model.new_cache(tokens.len()).unwrap();
    tokens
        .iter()
        .map(|&t| model.forward(t, &mut cache).unwrap())
        .collect()
}

fn max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

const TOKENS: [u32; 6] = [5, 17, 299, 0, 42, 17];

#[test]
fn gqa_equals_multi_head_with_repeated_kv_heads() {
    // Qwen3 with 4 query heads sharing 2 KV heads must equal the same model with 4 KV
    // heads where KV head h is a copy of shared head h / 2 (weights and biases).
    for arch in [Arch::Qwen3, Arch::Qwen2] {
        let gqa_cfg = config(arch, 4, 2, true);
        let mut gqa_src = MemorySource::random(gqa_cfg.clone(), 1, 0.1).unwrap();
        let mha_cfg = ModelConfig {
            n_kv_heads: 4,
            ..gqa_cfg.clone()
        };
        let mut mha_src = MemorySource::new(mha_cfg);
        let hd = gqa_cfg.head_dim;
        for t in gqa_src.tensors().to_vec() {
            let data = gqa_src.read_f32(&t.name).unwrap();
            let is_kv = t.name.contains("attn_k.") || t.name.contains("attn_v.");
            if !is_kv {
                mha_src.insert(&t.name, t.shape.clone(), data).unwrap();
                continue;
            }
            // rows (or bias entries) of KV head h, repeated for query heads 2h, 2h+1
            let row_len = data.len() / t.shape[0];
            let mut shape = t.shape.clone();
            shape[0] *= 2;
            let mut out = Vec::new();
            for head in data.chunks(hd * row_len) {
                out.extend_from_slice(head);
                out.extend_from_slice(head);
            }
            mha_src.insert(&t.name, shape, out).unwrap();
        }
        let gqa = Model::load(&mut gqa_src, WeightMode::F32).unwrap();
        let mha = Model::load(&mut mha_src, WeightMode::F32).unwrap();
        let err = max_abs_diff(&logits_of(&gqa, &TOKENS), &logits_of(&mha, &TOKENS));
        assert!(
            err < 1e-5,
            "{arch:?}: GQA vs repeated-KV MHA differ by {err}"
        );
    }
}

#[test]
fn tied_head_equals_untied_head_holding_the_embedding() {
    let tied_cfg = config(Arch::Llama, 2, 2, true);
    let mut tied_src = MemorySource::random(tied_cfg.clone(), 2, 0.1).unwrap();
    let mut untied_src = MemorySource::new(ModelConfig {
        tie_embeddings: false,
        ..tied_cfg
    });
    for t in tied_src.tensors().to_vec() {
        let data = tied_src.read_f32(&t.name).unwrap();
        untied_src.insert(&t.name, t.shape, data).unwrap();
    }
    let embd = tied_src.read_f32("token_embd.weight").unwrap();
    untied_src
        .insert("output.weight", vec![300, 128], embd)
        .unwrap();
    let tied = Model::load(&mut tied_src, WeightMode::F32).unwrap();
    let untied = Model::load(&mut untied_src, WeightMode::F32).unwrap();
    assert!(untied.weights.output.is_some() && tied.weights.output.is_none());
    assert_eq!(logits_of(&tied, &TOKENS), logits_of(&untied, &TOKENS));
}

#[test]
fn position_changes_the_logits_and_a_cleared_cache_repeats_them() {
    let mut src = MemorySource::random(config(Arch::Qwen3, 4, 1, true), 3, 0.1).unwrap();
    let model = Model::load(&mut src, WeightMode::F32).unwrap();
    let mut cache = model.new_cache(4).unwrap();
    let first = model.forward(7, &mut cache).unwrap();
    let second = model.forward(7, &mut cache).unwrap();
    assert_ne!(
        first, second,
        "same token at positions 0 and 1 gave equal logits"
    );
    cache.clear();
    assert_eq!(model.forward(7, &mut cache).unwrap(), first);
    assert_eq!(cache.len(), 1);
}

#[test]
fn greedy_appends_the_argmax_of_each_step() {
    let mut src = MemorySource::random(config(Arch::Qwen2, 4, 2, false), 4, 0.3).unwrap();
    let model = Model::load(&mut src, WeightMode::F32).unwrap();
    let out = model.greedy(&[1, 2, 3], 5).unwrap();
    let mut seq = vec![1, 2, 3];
    for &t in &out {
        let logits = logits_of(&model, &seq);
        assert_eq!(ops::argmax(logits.last().unwrap()), Some(t as usize));
        seq.push(t);
    }
    // streaming: the callback sees the same tokens and can stop early
    let mut seen = vec![];
    let n = model
        .greedy_with(&[1, 2, 3], 5, |t| {
            seen.push(t);
            seen.len() < 2
        })
        .unwrap();
    assert_eq!((n, &seen[..]), (2, &out[..2]));
}

#[test]
fn full_cache_bad_token_and_empty_prompt_are_errors() {
    let mut src = MemorySource::random(config(Arch::Llama, 2, 1, true), 5, 0.1).unwrap();
    let model = Model::load(&mut src, WeightMode::F32).unwrap();
    let mut cache = model.new_cache(1).unwrap();
    assert!(matches!(
        model.forward(300, &mut cache),
        Err(Error::InvalidArgument(_))
    ));
    model.forward(299, &mut cache).unwrap();
    assert!(matches!(
        model.forward(1, &mut cache),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        model.greedy(&[], 3),
        Err(Error::InvalidArgument(_))
    ));
    assert!(model.new_cache(usize::MAX).is_err());
}

#[test]
fn missing_and_misshapen_tensors_are_typed_errors() {
    let cfg = config(Arch::Qwen3, 4, 1, true);
    let mut src = MemorySource::random(cfg.clone(), 6, 0.1).unwrap();
    src.remove("blk.1.attn_k_norm.weight");
    assert!(matches!(
        Model::load(&mut src, WeightMode::F32),
        Err(Error::MissingTensor(n)) if n == "blk.1.attn_k_norm.weight"
    ));
    let mut src = MemorySource::random(cfg, 6, 0.1).unwrap();
    src.insert("blk.0.ffn_up.weight", vec![128, 192], vec![0.0; 128 * 192])
        .unwrap();
    assert!(matches!(
        Model::load(&mut src, WeightMode::F32),
        Err(Error::ShapeMismatch { tensor, .. }) if tensor == "blk.0.ffn_up.weight"
    ));
}
