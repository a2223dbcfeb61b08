use super::*;
use crate::convert::{convert, ConvertOptions};
use crate::format::gguf_source::GgufSource;
use crate::format::package::{load_tensor, Manifest};
use crate::format::source::ModelSource;
use crate::synth::SynthSource;
use std::collections::HashMap;
use std::path::PathBuf;

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("pocketrt-ggufstream-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Chunk sizes that cut the file everywhere: single bytes, odd sizes, big pieces.
const SIZES: [usize; 7] = [1, 3, 17, 1000, 4093, 65_537, 7];

/// The synthetic model `preset` as GGUF bytes, and the package the native converter
/// makes from that same file.
fn gguf_and_package(preset: &str, dir: &TempDir) -> (Vec<u8>, Manifest) {
    gguf_and_package_as(preset, dir, WeightFormat::Q4)
}

/// [`gguf_and_package`] converted with `weights`.
fn gguf_and_package_as(preset: &str, dir: &TempDir, weights: WeightFormat) -> (Vec<u8>, Manifest) {
    let (bytes, mut src) = gguf_file(preset, dir, &[]);
    let opts = ConvertOptions {
        weights,
        ..Default::default()
    };
    let report = convert(&mut src, &dir.0.join("pkg"), &opts, &mut |_| {}).unwrap();
    (bytes, report.manifest)
}

/// The synthetic model `preset` as GGUF bytes (the matrices named in `q8_0` as Q8_0,
/// the rest Q4_1), written to `dir` and opened there.
fn gguf_file(preset: &str, dir: &TempDir, q8_0: &[&str]) -> (Vec<u8>, GgufSource) {
    let bytes = SynthSource::preset(preset, 5)
        .unwrap()
        .gguf_writer_with_q8_0(q8_0)
        .unwrap()
        .to_bytes()
        .unwrap();
    let path = dir.0.join("model.gguf");
    std::fs::write(&path, &bytes).unwrap();
    (bytes, GgufSource::open(&path).unwrap())
}

/// The streamed tensors (`out`, of `stream`) equal the package in `dir` of `manifest`,
/// and the stream's table is its.
fn assert_equals_package(
    what: &str,
    dir: &TempDir,
    manifest: &Manifest,
    (stream, out): (&GgufStream, &HashMap<(usize, usize), Vec<u8>>),
) {
    assert_eq!(
        stream.tensors(),
        &manifest.tensors[..],
        "{what}: the converter's table"
    );
    for (t, entry) in manifest.tensors.iter().enumerate() {
        let want = load_tensor(dir.0.join("pkg"), manifest, &entry.name).unwrap();
        let got: Vec<u8> = (0..entry.parts.len())
            .flat_map(|p| out[&(t, p)].clone())
            .collect();
        assert!(
            got == want,
            "{what}: tensor {} differs from the package",
            entry.name
        );
    }
}

/// Parse the header from a growing prefix (chunks of `SIZES`); returns it and the prefix.
fn header(bytes: &[u8]) -> (Gguf, usize) {
    let mut at = 0;
    for size in SIZES.iter().cycle() {
        at = (at + size).min(bytes.len());
        if let Some(g) = header_from_prefix(&bytes[..at], Some(bytes.len() as u64), "test").unwrap()
        {
            return (g, at);
        }
        assert!(at < bytes.len(), "the whole file never parsed");
    }
    unreachable!()
}

/// Every part's bytes as the stream emits them (checked to cover each part exactly once).
fn stream_all(bytes: &[u8]) -> (GgufStream, HashMap<(usize, usize), Vec<u8>>) {
    stream_all_as(bytes, WeightFormat::Q4)
}

/// [`stream_all`] with each matrix as `weights` holds it.
fn stream_all_as(
    bytes: &[u8],
    weights: WeightFormat,
) -> (GgufStream, HashMap<(usize, usize), Vec<u8>>) {
    let (g, prefix) = header(bytes);
    let mut stream = GgufStream::new_as(g, "test", weights).unwrap();
    let mut out: HashMap<(usize, usize), Vec<u8>> = HashMap::new();
    let mut written: HashMap<(usize, usize), u64> = HashMap::new();
    let tensors = stream.tensors().to_vec();
    let mut emit = |c: Chunk<'_>| {
        let part = &tensors[c.tensor].parts[c.part];
        let buf = out
            .entry((c.tensor, c.part))
            .or_insert_with(|| vec![0; part.bytes as usize]);
        buf[c.offset as usize..c.offset as usize + c.bytes.len()].copy_from_slice(c.bytes);
        *written.entry((c.tensor, c.part)).or_default() += c.bytes.len() as u64;
    };
    stream.feed(&bytes[..prefix], &mut emit).unwrap();
    let mut at = prefix;
    for size in SIZES.iter().cycle() {
        if at == bytes.len() {
            break;
        }
        let end = (at + size).min(bytes.len());
        stream.feed(&bytes[at..end], &mut emit).unwrap();
        at = end;
    }
    stream.finish().unwrap();
    for (t, entry) in tensors.iter().enumerate() {
        for (p, part) in entry.parts.iter().enumerate() {
            assert_eq!(
                written.get(&(t, p)),
                Some(&part.bytes),
                "{} {} written once",
                entry.name,
                part.name
            );
        }
    }
    (stream, out)
}

#[test]
fn streamed_conversion_equals_the_native_converter_byte_for_byte() {
    // qwen3 (tied), qwen2 (bias, untied head), llama (permuted q/k rows undone per head).
    for preset in ["tiny-qwen3", "tiny-qwen2", "tiny-llama"] {
        let dir = TempDir::new(preset);
        let (bytes, manifest) = gguf_and_package(preset, &dir);
        let (stream, out) = stream_all(&bytes);
        assert_equals_package(preset, &dir, &manifest, (&stream, &out));
        // Synthetic Q4_1 pairs carry equal params: every group is kept exactly.
        assert_eq!(
            stream.merge().groups_requantized,
            0,
            "{preset}: Q4_1 → Q4 g64 lossless"
        );
        assert!(stream.merge().groups_exact > 0);
    }
}

#[test]
fn a_stream_that_ends_early_is_truncated_and_rewind_replays_identically() {
    let dir = TempDir::new("short");
    let (bytes, _) = gguf_and_package("tiny-qwen3", &dir);
    let (g, _) = header(&bytes);
    let mut stream = GgufStream::new(g, "short.gguf").unwrap();
    let half = bytes.len() / 2;
    let mut first = Vec::new();
    stream.feed(&bytes[..half], &mut |_| {}).unwrap();
    let mark = stream.cursor();
    assert_eq!(mark.position(), half as u64);
    stream
        .feed(&bytes[half..half + 5000], &mut |c| {
            first.push((c.tensor, c.part, c.offset, c.bytes.to_vec()))
        })
        .unwrap();
    stream.rewind(mark);
    let mut again = Vec::new();
    stream
        .feed(&bytes[half..half + 5000], &mut |c| {
            again.push((c.tensor, c.part, c.offset, c.bytes.to_vec()))
        })
        .unwrap();
    assert_eq!(first, again, "a rewound stream emits the same chunks again");
    assert!(!stream.done());
    match stream.finish() {
        Err(Error::ModelTruncated {
            what, available, ..
        }) => {
            assert_eq!(what, "short.gguf");
            assert_eq!(available, half as u64 + 5000);
        }
        other => panic!("expected ModelTruncated, got {other:?}"),
    }
}

#[test]
fn bad_headers_are_typed_errors() {
    // Not a GGUF at all.
    let html = b"<!doctype html><html>not a model</html>";
    match header_from_prefix(html, Some(html.len() as u64), "page.html") {
        Err(Error::BadMagic { .. }) => {}
        other => panic!("expected BadMagic, got {other:?}"),
    }
    // A header without a tensor the engine needs.
    let bytes = SynthSource::preset("tiny-qwen3", 1)
        .unwrap()
        .gguf_writer()
        .unwrap()
        .to_bytes()
        .unwrap();
    let mut g = Gguf::parse(&bytes).unwrap();
    g.tensors.retain(|t| t.name != "blk.1.ffn_down.weight");
    match GgufStream::new(g, "x.gguf") {
        Err(Error::MissingTensor(name)) => assert_eq!(name, "blk.1.ffn_down.weight"),
        Err(e) => panic!("expected MissingTensor, got {e:?}"),
        Ok(_) => panic!("expected MissingTensor"),
    }
    // A prefix cut inside the header asks for more bytes.
    assert!(
        header_from_prefix(&bytes[..100], Some(bytes.len() as u64), "x")
            .unwrap()
            .is_none()
    );
}

/// `q8` weights: every matrix Q8 g32, byte for byte the package `convert --weights q8`
/// writes from the same file.
#[test]
fn streamed_q8_conversion_equals_the_native_converter_byte_for_byte() {
    let dir = TempDir::new("q8");
    let (bytes, manifest) = gguf_and_package_as("tiny-qwen2", &dir, WeightFormat::Q8);
    let (stream, out) = stream_all_as(&bytes, WeightFormat::Q8);
    assert_equals_package("q8", &dir, &manifest, (&stream, &out));
}

/// `keep` weights over a GGUF of Q4_1 and Q8_0 matrices: the Q8_0 ones kept exactly as
/// Q8 g32, the Q4_1 ones as Q4 g64, except those stacked with a Q8_0 one (q|k with v),
/// which are Q8 through Q4 g64 (as the GPU's upload makes them).
#[test]
fn keep_streams_q8_0_matrices_and_their_stacks_as_q8() {
    let dir = TempDir::new("keep");
    let q8_0 = [
        "blk.0.attn_v.weight",
        "blk.1.ffn_down.weight",
        "token_embd.weight",
    ];
    let (bytes, mut src) = gguf_file("tiny-qwen3", &dir, &q8_0);
    let (stream, out) = stream_all_as(&bytes, WeightFormat::Keep);
    let stacked = ["blk.0.attn_q.weight", "blk.0.attn_k.weight"];
    let mut seen = 0;
    for (t, entry) in stream.tensors().iter().enumerate() {
        if entry.shape.len() != 2 {
            continue;
        }
        let name = entry.name.as_str();
        let got: Vec<u8> = (0..2).flat_map(|p| out[&(t, p)].clone()).collect();
        let want = if q8_0.contains(&name) {
            let (q, stats) = src.read_q8(name).unwrap();
            assert_eq!(stats.groups_requantized, 0, "{name}: Q8_0 kept exactly");
            [q.codes_bytes(), q.scales_bytes()].concat()
        } else if stacked.contains(&name) {
            let (q4, _) = src.read_q4(name).unwrap();
            let q = Q8Tensor::quantize(&q4.dequantize(), q4.rows, q4.cols).unwrap();
            [q.codes_bytes(), q.scales_bytes()].concat()
        } else {
            let (q, _) = src.read_q4(name).unwrap();
            [q.codes_bytes(), q.qparams_bytes()].concat()
        };
        let q8 = q8_0.contains(&name) || stacked.contains(&name);
        seen += usize::from(q8);
        let dtype = if q8 { DType::Q8g32 } else { DType::Q4g64 };
        assert_eq!(entry.dtype, dtype, "{name}");
        assert!(got == want, "{name}: the streamed bytes");
    }
    assert_eq!(seen, 5);
}
