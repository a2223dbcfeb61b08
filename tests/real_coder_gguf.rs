//! The GGUF reader on the real Qwen2.5-Coder-0.5B-Instruct Q4_K_M file (491 MB, never
//! committed). The path comes from POCKETRT_CODER_GGUF (scripts/test sets it after running
//! scripts/fetch-test-models); without it the test fails rather than skipping.
//!
//! First rows of one tensor per ggml type the model uses are compared bit-exactly with
//! gguf-py's dequantization, stored in tests/fixtures/coder_sample.gguf (made by
//! `tests/fixtures/make_gguf_fixtures.py --coder PATH`).

mod real_data;

use pocketrt::format::gguf::{GgmlType, Gguf};
use pocketrt::format::gguf_dequant::{dequantize, is_supported};
use real_data::coder_gguf;
use std::fs::File;

fn open_coder() -> (Gguf, File) {
    let path = coder_gguf();
    Gguf::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn coder_header_has_qwen2_shapes_and_every_tensor_inside_the_file() {
    let (g, file) = open_coder();
    let file_len = file.metadata().unwrap().len();
    assert_eq!(g.file_len, Some(file_len));
    assert_eq!(g.version, 3);
    assert_eq!(g.get_str("general.architecture"), Some("qwen2"));
    assert_eq!(g.get_u64("qwen2.block_count"), Some(24));
    assert_eq!(g.get_u64("qwen2.embedding_length"), Some(896));
    assert_eq!(g.get_u64("qwen2.attention.head_count"), Some(14));
    assert_eq!(g.get_u64("qwen2.attention.head_count_kv"), Some(2));
    assert_eq!(g.get_f64("qwen2.rope.freq_base"), Some(1e6));
    let tokens = g
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .unwrap();
    assert_eq!(tokens.len(), 151936);
    assert!(tokens.iter().all(|t| t.as_str().is_some()));
    assert_eq!(tokens[0].as_str(), Some("!"));
    assert!(g
        .get_str("tokenizer.chat_template")
        .unwrap()
        .contains("<|im_start|>"));

    assert_eq!(g.tensors.len(), 291);
    let mut ranges = Vec::new();
    for t in &g.tensors {
        let r = g.tensor_range(t).unwrap();
        assert!(r.start >= g.data_offset && r.end <= file_len, "{}", t.name);
        assert!(is_supported(t.ty), "{}: {}", t.name, t.ty);
        ranges.push(r);
    }
    // The tensors tile the data section without overlapping.
    ranges.sort_by_key(|r| r.start);
    assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
    let embd = g.tensor("token_embd.weight").unwrap();
    assert_eq!(embd.shape(), vec![151936, 896]);
    assert_eq!(
        g.tensor("blk.23.ffn_down.weight").unwrap().shape(),
        vec![896, 4864]
    );
}

#[test]
fn coder_first_rows_dequantize_exactly_as_gguf_py() {
    let (g, mut file) = open_coder();
    let sample_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/coder_sample.gguf"
    );
    let sample_bytes = std::fs::read(sample_path).unwrap();
    let sample = Gguf::parse(&sample_bytes).unwrap();
    let rows = sample.get_u64("sample.rows").unwrap();
    let mut types = Vec::new();
    for s in &sample.tensors {
        let name = s.name.strip_suffix(".rows").unwrap();
        let t = g.tensor(name).unwrap();
        types.push(t.ty);
        let r = sample.tensor_range(s).unwrap();
        let expected = f32s(&sample_bytes[r.start as usize..r.end as usize]);
        let raw = g.read_rows(&mut file, t, 0..rows).unwrap();
        let ours = dequantize(t.ty, &raw, expected.len()).unwrap();
        let bad = ours
            .iter()
            .zip(&expected)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        assert_eq!(bad, None, "{name} ({}) differs from gguf-py", t.ty);
    }
    for ty in [
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        assert!(types.contains(&ty), "sample lacks a {ty} tensor");
    }
}

#[test]
fn coder_weights_are_finite_with_plausible_magnitude() {
    let (g, mut file) = open_coder();
    let check = |name: &str, x: &[f32], lo: f64, hi: f64| {
        assert!(x.iter().all(|v| v.is_finite()), "{name}: non-finite values");
        let mean_abs = x.iter().map(|v| v.abs() as f64).sum::<f64>() / x.len() as f64;
        assert!(
            (lo..hi).contains(&mean_abs),
            "{name}: mean |x| = {mean_abs}"
        );
    };
    let q = g.tensor("blk.0.attn_q.weight").unwrap();
    let x = g.read_tensor_f32(&mut file, q).unwrap();
    assert_eq!(x.len(), 896 * 896);
    check(&q.name, &x, 1e-3, 1.0);
    let embd = g.tensor("token_embd.weight").unwrap();
    let raw = g.read_rows(&mut file, embd, 0..64).unwrap();
    check(
        &embd.name,
        &dequantize(embd.ty, &raw, 64 * 896).unwrap(),
        1e-3,
        1.0,
    );
    let norm = g.tensor("output_norm.weight").unwrap();
    check(
        &norm.name,
        &g.read_tensor_f32(&mut file, norm).unwrap(),
        0.1,
        100.0,
    );
}
