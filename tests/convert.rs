//! Conversion: a GGUF stored the way MNN-Pocket-0.3B is published (Q4_1, each g64 group as
//! two g32 blocks with equal (d, m)) becomes a ~173 MB package whose codes are the GGUF's,
//! bit for bit — checked by an independent re-packing of the Q4_1 nibbles here. The GGUF
//! is `pocketrt synth --preset pocket-0.3b --gguf`'s.

use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::format::package_source::PackageSource;
use pocketrt::format::{self, ModelSource};
use pocketrt::synth::{write_gguf, SynthSource};
use std::path::PathBuf;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pocketrt-conv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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

#[test]
fn pocket_shape_q4_1_gguf_converts_to_173_mb_with_codes_bit_exact() {
    let synth = SynthSource::preset("pocket-0.3b", 1).unwrap();
    let dir = tmpdir("pocket");
    let gguf_path = dir.join("pocket.gguf");
    write_gguf(&synth, &gguf_path).unwrap();

    let mut src = format::open(&gguf_path).unwrap();
    assert_eq!(src.config(), synth.config());
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
    let norm = synth.vector("output_norm.weight").unwrap();
    assert_eq!(pkg.read_f32("output_norm.weight").unwrap(), norm);
    for name in [
        "token_embd.weight",
        "blk.0.attn_k.weight",
        "blk.27.ffn_down.weight",
    ] {
        let (q, _) = pkg.read_q4(name).unwrap();
        let bytes = synth.q4_1_bytes(name).unwrap();
        for (g, pair) in bytes.chunks_exact(40).enumerate() {
            let (words, params) = expected_group(&pair[..20], &pair[20..]);
            assert_eq!(&q.codes[g * 8..g * 8 + 8], &words, "{name} group {g} codes");
            assert_eq!(q.qparams[g], params, "{name} group {g} params");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Logits of 8 greedy CPU steps (Q4 weights) of the model at `path`.
fn greedy_logits(path: &std::path::Path) -> Vec<Vec<f32>> {
    use pocketrt::cpu::{Model, WeightMode};
    let model = Model::load(&mut *format::open(path).unwrap(), WeightMode::Q4).unwrap();
    let mut cache = model.new_cache(8).unwrap();
    let mut token = 1u32;
    (0..8)
        .map(|_| {
            let logits = model.forward(token, &mut cache).unwrap();
            token = pocketrt::cpu::ops::argmax(&logits).unwrap() as u32;
            logits
        })
        .collect()
}

#[test]
fn synthetic_tiny_presets_give_finite_logits_and_qwen_ggufs_equal_their_packages() {
    for preset in ["tiny-qwen3", "tiny-qwen2", "tiny-llama"] {
        let dir = tmpdir(preset);
        let mut synth = SynthSource::preset(preset, 3).unwrap();
        pocketrt::synth::write_package(&mut synth, &dir.join("pkg")).unwrap();
        let from_pkg = greedy_logits(&dir.join("pkg"));
        for logits in &from_pkg {
            let max = logits.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(
                logits.iter().all(|v| v.is_finite()) && (0.1..100.0).contains(&max),
                "{preset}: max |logit| {max}"
            );
        }
        let gguf = write_gguf(&synth, &dir.join("m.gguf"));
        if preset == "tiny-llama" {
            // llama GGUFs store q/k rows permuted; the writer refuses rather than lie.
            assert!(matches!(gguf, Err(pocketrt::Error::Unsupported { .. })));
        } else {
            gguf.unwrap();
            assert_eq!(from_pkg, greedy_logits(&dir.join("m.gguf")), "{preset}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
