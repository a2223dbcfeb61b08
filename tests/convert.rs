//! Conversion: a GGUF stored the way MNN-Pocket-0.3B is published (Q4_1, each g64 group as
//! two g32 blocks with equal (d, m)) becomes a ~173 MB package whose codes are the GGUF's,
//! bit for bit — checked by an independent re-packing of the Q4_1 nibbles here.

use pocketrt::config::ModelConfig;
use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::format::gguf::{GgmlType, MetaValue};
use pocketrt::format::gguf_write::GgufWriter;
use pocketrt::format::package_source::PackageSource;
use pocketrt::format::{self, ModelSource};
use std::path::PathBuf;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pocketrt-conv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// xorshift64*: deterministic bytes without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Q4_1 bytes for `rows × cols` where both g32 blocks of every g64 group share (d, m).
fn q4_1_pairs(rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows * cols / 32 * 20);
    for _ in 0..rows * cols / 64 {
        let r = rng.next();
        let d = half::f16::from_f32(0.001 + (r & 0xff) as f32 * 1e-4).to_bits();
        let m = half::f16::from_f32(-(((r >> 8) & 0xff) as f32) * 1e-3).to_bits();
        for _ in 0..2 {
            out.extend_from_slice(&d.to_le_bytes());
            out.extend_from_slice(&m.to_le_bytes());
            for _ in 0..2 {
                out.extend_from_slice(&rng.next().to_le_bytes());
            }
        }
    }
    out
}

/// The package layout of one g64 group, re-derived from ggml's Q4_1 layout: element j < 16
/// of a block is `qs[j] & 15`, element j + 16 is `qs[j] >> 4`; our word w of a group holds
/// elements 8w..8w+8 with byte b = element (8w+b) | element (8w+b+4) << 4.
fn expected_group(block0: &[u8], block1: &[u8]) -> ([u32; 8], u32) {
    let mut codes = [0u8; 64];
    for (half_i, blk) in [block0, block1].iter().enumerate() {
        for j in 0..16 {
            codes[half_i * 32 + j] = blk[4 + j] & 15;
            codes[half_i * 32 + j + 16] = blk[4 + j] >> 4;
        }
    }
    let mut words = [0u32; 8];
    for (w, word) in words.iter_mut().enumerate() {
        for b in 0..4 {
            let byte = codes[8 * w + b] | (codes[8 * w + b + 4] << 4);
            *word |= (byte as u32) << (8 * b);
        }
    }
    let d = u16::from_le_bytes([block0[0], block0[1]]) as u32;
    let m = u16::from_le_bytes([block0[2], block0[3]]) as u32;
    (words, d | (m << 16))
}

fn pocket_config() -> ModelConfig {
    ModelConfig::from_hf_json(
        r#"{"architectures":["Qwen3ForCausalLM"],"hidden_size":896,"num_hidden_layers":28,
        "num_attention_heads":14,"num_key_value_heads":2,"head_dim":64,"intermediate_size":2560,
        "vocab_size":65536,"rope_theta":1000000.0,"rms_norm_eps":1e-6,
        "max_position_embeddings":40960,"tie_word_embeddings":true,"eos_token_id":65512}"#,
    )
    .unwrap()
}

#[test]
fn pocket_shape_q4_1_gguf_converts_to_173_mb_with_codes_bit_exact() {
    let cfg = pocket_config();
    let dir = tmpdir("pocket");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut w = GgufWriter::new();
    for (k, v) in [
        ("general.architecture", MetaValue::String("qwen3".into())),
        ("qwen3.block_count", MetaValue::U32(28)),
        ("qwen3.embedding_length", MetaValue::U32(896)),
        ("qwen3.feed_forward_length", MetaValue::U32(2560)),
        ("qwen3.attention.head_count", MetaValue::U32(14)),
        ("qwen3.attention.head_count_kv", MetaValue::U32(2)),
        ("qwen3.attention.key_length", MetaValue::U32(64)),
        ("qwen3.context_length", MetaValue::U32(40960)),
        ("qwen3.rope.freq_base", MetaValue::F32(1e6)),
        (
            "qwen3.attention.layer_norm_rms_epsilon",
            MetaValue::F32(1e-6),
        ),
        ("tokenizer.ggml.eos_token_id", MetaValue::U32(65512)),
    ] {
        w.meta(k, v);
    }
    let mut originals = std::collections::HashMap::new();
    for (name, shape) in cfg.expected_tensors() {
        let dims: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
        if let [rows, cols] = shape[..] {
            let bytes = q4_1_pairs(rows, cols, &mut rng);
            w.tensor(&name, &dims, GgmlType::Q4_1, &bytes).unwrap();
            originals.insert(name, bytes);
        } else {
            let v: Vec<f32> = (0..shape[0]).map(|i| 1.0 + i as f32 * 1e-3).collect();
            w.tensor(&name, &dims, GgmlType::F32, bytemuck::cast_slice(&v))
                .unwrap();
        }
    }
    let gguf_path = dir.join("pocket.gguf");
    w.write_to(std::io::BufWriter::new(
        std::fs::File::create(&gguf_path).unwrap(),
    ))
    .unwrap();
    drop(w);

    let mut src = format::open(&gguf_path).unwrap();
    assert_eq!(src.config(), &{
        let mut c = cfg.clone();
        c.bos_token_id = None;
        c
    });
    let out = dir.join("pkg");
    let report = convert(src.as_mut(), &out, &ConvertOptions::default(), &mut |_| {}).unwrap();
    let mb = report.package_bytes as f64 / 1e6;
    println!("pocket-shape package: {mb:.1} MB, {:?}", report.merge);
    assert!(
        (170.0..176.0).contains(&mb),
        "package is {mb:.1} MB, expected ~173"
    );
    assert_eq!(report.merge.groups_requantized, 0);
    assert_eq!(report.merge.groups_exact, 302_776_320 / 64);
    assert!(report.manifest.shards.iter().all(|s| s.bytes <= 32 << 20));

    // Read the package back and compare every group of a few tensors with the re-packing.
    let mut pkg = PackageSource::open(&out).unwrap();
    assert_eq!(pkg.config(), src.config());
    let norm: Vec<f32> = (0..896).map(|i| 1.0 + i as f32 * 1e-3).collect();
    assert_eq!(pkg.read_f32("output_norm.weight").unwrap(), norm);
    for name in [
        "token_embd.weight",
        "blk.0.attn_k.weight",
        "blk.27.ffn_down.weight",
    ] {
        let (q, _) = pkg.read_q4(name).unwrap();
        let bytes = &originals[name];
        for (g, pair) in bytes.chunks_exact(40).enumerate() {
            let (words, params) = expected_group(&pair[..20], &pair[20..]);
            assert_eq!(&q.codes[g * 8..g * 8 + 8], &words, "{name} group {g} codes");
            assert_eq!(q.qparams[g], params, "{name} group {g} params");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
