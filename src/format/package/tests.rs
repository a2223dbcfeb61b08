use super::*;
use crate::config::Arch;
use crate::error::Error;
use crate::quant::Q4Tensor;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn config() -> ModelConfig {
    ModelConfig {
        arch: Arch::Qwen3,
        hidden_size: 64,
        n_layers: 1,
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 32,
        ffn_size: 128,
        vocab_size: 100,
        rope_theta: 1e6,
        rms_eps: 1e-6,
        max_context: 512,
        tie_embeddings: true,
        qkv_bias: false,
        qk_norm: true,
        bos_token_id: None,
        eos_token_ids: vec![99],
        pad_token_id: Some(98),
    }
}

/// A fresh, empty folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("pocketrt-pkg-{name}-{}", std::process::id()));
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

/// A test tensor: (name, dtype, shape, parts).
type TestTensor = (String, DType, Vec<usize>, Vec<(&'static str, Vec<u8>)>);

/// The tensors of the test package.
fn tensors() -> Vec<TestTensor> {
    let bytes = |n: usize, seed: usize| -> Vec<u8> {
        (0..n).map(|i| ((i * 31 + seed * 7) % 251) as u8).collect()
    };
    let vals: Vec<f32> = (0..4 * 128)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let q = Q4Tensor::quantize(&vals, 4, 128).unwrap();
    // Three groups: the scales part is padded to whole words.
    let q8 = crate::quant::Q8Tensor::quantize(&vals[..96], 1, 96).unwrap();
    vec![
        (
            "a.f32".into(),
            DType::F32,
            vec![3, 50],
            vec![("data", bytes(600, 1))],
        ),
        (
            "b.f16".into(),
            DType::F16,
            vec![7],
            vec![("data", bytes(14, 2))],
        ),
        (
            "c.q4".into(),
            DType::Q4g64,
            vec![4, 128],
            vec![
                ("codes", q.codes_bytes().to_vec()),
                ("qparams", q.qparams_bytes().to_vec()),
            ],
        ),
        (
            "d.f32".into(),
            DType::F32,
            vec![1000],
            vec![("data", bytes(4000, 3))],
        ),
        ("e.f16".into(), DType::F16, vec![0], vec![("data", vec![])]),
        (
            "f.q8".into(),
            DType::Q8g32,
            vec![1, 96],
            vec![
                ("codes", q8.codes_bytes().to_vec()),
                ("scales", q8.scales_bytes().to_vec()),
            ],
        ),
    ]
}

const TINY_SHARD: u64 = 1000;

fn write_package(dir: &Path) -> Manifest {
    let mut w = PackageWriter::create(dir, config())
        .unwrap()
        .with_shard_size(TINY_SHARD)
        .unwrap();
    w.set_tokenizer(r#"{"model":{}}"#).unwrap();
    w.set_chat_template(Some("{{ messages }}".into()));
    for (name, dtype, shape, parts) in tensors() {
        let parts: Vec<(&str, &[u8])> = parts.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        w.add_tensor(&name, dtype, &shape, &parts).unwrap();
    }
    w.finish().unwrap()
}

/// Feed every shard in `chunk`-sized pieces; rebuild every part, checking no byte arrives
/// twice.
fn read_back(dir: &Path, m: &Manifest, chunk: usize) -> HashMap<(usize, usize), Vec<u8>> {
    let mut parts: HashMap<(usize, usize), Vec<Option<u8>>> = HashMap::new();
    for (ti, t) in m.tensors.iter().enumerate() {
        for (pi, p) in t.parts.iter().enumerate() {
            parts.insert((ti, pi), vec![None; p.bytes as usize]);
        }
    }
    for (index, shard) in m.shards.iter().enumerate() {
        let data = std::fs::read(dir.join(&shard.file)).unwrap();
        let mut r = ShardReader::new(m, index).unwrap();
        for piece in data.chunks(chunk) {
            r.feed(piece, &mut |c: Chunk<'_>| {
                let dst = parts.get_mut(&(c.tensor, c.part)).unwrap();
                for (i, &b) in c.bytes.iter().enumerate() {
                    let slot = &mut dst[c.offset as usize + i];
                    assert!(slot.is_none(), "byte emitted twice");
                    *slot = Some(b);
                }
            })
            .unwrap();
        }
        r.finish().unwrap();
    }
    parts
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                v.into_iter()
                    .map(|b| b.expect("byte never emitted"))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn parts_straddle_shards_and_read_back_exactly_with_any_chunking() {
    let tmp = TempDir::new("roundtrip");
    let m = write_package(&tmp.0);
    assert!(m.shards.len() > 5, "the tiny shard size splits the stream");
    let want = tensors();
    for chunk in [1, 7, 333, usize::MAX] {
        let got = read_back(&tmp.0, &m, chunk);
        for (ti, (name, _, _, parts)) in want.iter().enumerate() {
            for (pi, (_, bytes)) in parts.iter().enumerate() {
                assert_eq!(&got[&(ti, pi)], bytes, "{name} part {pi}, chunk {chunk}");
            }
        }
    }
}

#[test]
fn layout_is_aligned_and_shards_are_cut_at_the_shard_size() {
    let tmp = TempDir::new("layout");
    let m = write_package(&tmp.0);
    for t in &m.tensors {
        for p in &t.parts {
            assert_eq!(p.offset % ALIGN, 0, "{} {}", t.name, p.name);
        }
    }
    let (last, full) = m.shards.split_last().unwrap();
    assert!(full.iter().all(|s| s.bytes == TINY_SHARD));
    assert!(last.bytes <= TINY_SHARD);
    for (i, s) in m.shards.iter().enumerate() {
        assert_eq!(s.file, shard_file_name(i));
        assert_eq!(
            std::fs::metadata(tmp.0.join(&s.file)).unwrap().len(),
            s.bytes
        );
    }
    // The stream ends where the last part ends (no trailing padding).
    let end = m
        .tensors
        .iter()
        .flat_map(|t| &t.parts)
        .map(|p| p.offset + p.bytes)
        .max();
    assert_eq!(end, Some(m.stream_len()));
    assert_eq!(Manifest::read(&tmp.0).unwrap(), m);
    let pkg = PackageDir::open(&tmp.0).unwrap();
    assert_eq!(
        pkg.tokenizer_json().unwrap().as_deref(),
        Some(r#"{"model":{}}"#)
    );
    assert_eq!(m.chat_template.as_deref(), Some("{{ messages }}"));
}

#[test]
fn disk_helpers_return_the_original_bytes() {
    let tmp = TempDir::new("disk");
    let m = write_package(&tmp.0);
    let mut pkg = PackageDir::open(&tmp.0).unwrap();
    for (name, _, _, parts) in tensors() {
        let want: Vec<u8> = parts.iter().flat_map(|(_, b)| b.clone()).collect();
        assert_eq!(pkg.load_tensor(&name).unwrap(), want, "{name}");
        assert_eq!(load_tensor(&tmp.0, &m, &name).unwrap(), want);
    }
    let q = m.tensor("c.q4").unwrap();
    let bytes = pkg.load_tensor("c.q4").unwrap();
    let (codes, qparams) = bytes.split_at(q.parts[0].bytes as usize);
    let vals: Vec<f32> = (0..4 * 128)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    assert_eq!(
        Q4Tensor::from_parts(4, 128, codes, qparams).unwrap(),
        Q4Tensor::quantize(&vals, 4, 128).unwrap()
    );
    assert!(matches!(
        pkg.load_tensor("nope"),
        Err(Error::MissingTensor(_))
    ));
    let mut total = 0;
    read_package(&tmp.0, |c| total += c.bytes.len()).unwrap();
    assert_eq!(
        total as u64,
        m.tensors.iter().map(|t| t.bytes()).sum::<u64>()
    );
}

#[test]
fn corrupt_shards_are_detected() {
    let tmp = TempDir::new("corrupt");
    let m = write_package(&tmp.0);
    let path = tmp.0.join(&m.shards[2].file);
    let good = std::fs::read(&path).unwrap();
    let feed_all = |data: &[u8]| {
        let mut r = ShardReader::new(&m, 2).unwrap();
        r.feed(data, &mut |_| {})?;
        r.finish()
    };
    let mut flipped = good.clone();
    flipped[500] ^= 0x01;
    assert!(matches!(
        feed_all(&flipped),
        Err(Error::ShardHashMismatch { .. })
    ));
    let short = &good[..good.len() - 1];
    assert!(matches!(
        feed_all(short),
        Err(Error::ShardSizeMismatch {
            expected: 1000,
            found: 999,
            ..
        })
    ));
    let mut long = good.clone();
    long.push(0);
    assert!(matches!(
        feed_all(&long),
        Err(Error::ShardSizeMismatch { found: 1001, .. })
    ));
    // The same through the disk helpers.
    std::fs::write(&path, &flipped).unwrap();
    assert!(matches!(
        read_package(&tmp.0, |_| {}),
        Err(Error::ShardHashMismatch { .. })
    ));
    assert!(matches!(
        PackageDir::open(&tmp.0).unwrap().verify_shard(2),
        Err(Error::ShardHashMismatch { .. })
    ));
    std::fs::write(&path, short).unwrap();
    assert!(matches!(
        read_package(&tmp.0, |_| {}),
        Err(Error::ShardSizeMismatch { .. })
    ));
}

/// The written manifest as JSON, edited by `f`, parsed again.
fn parse_edited(
    m: &Manifest,
    f: impl FnOnce(&mut serde_json::Value),
) -> crate::error::Result<Manifest> {
    let mut v = serde_json::to_value(m).unwrap();
    f(&mut v);
    Manifest::from_json(&v.to_string())
}

#[test]
fn bad_manifests_give_typed_errors() {
    let tmp = TempDir::new("manifest");
    let m = write_package(&tmp.0);
    let missing = |r: crate::error::Result<Manifest>, field: &str| match r {
        Err(Error::MissingField { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected missing {field}, got {other:?}"),
    };
    let manifest_err = |r: crate::error::Result<Manifest>, needle: &str| match r {
        Err(Error::Manifest(msg)) => assert!(msg.contains(needle), "{msg:?} lacks {needle:?}"),
        other => panic!("expected a manifest error with {needle:?}, got {other:?}"),
    };
    assert_eq!(parse_edited(&m, |_| {}).unwrap(), m);
    missing(
        parse_edited(&m, |v| drop(v.as_object_mut().unwrap().remove("shards"))),
        "shards",
    );
    missing(
        parse_edited(&m, |v| drop(v.as_object_mut().unwrap().remove("format"))),
        "format",
    );
    missing(
        parse_edited(&m, |v| {
            drop(v["tensors"][0].as_object_mut().unwrap().remove("shape"))
        }),
        "shape",
    );
    manifest_err(
        parse_edited(&m, |v| v["format"] = "pocketrt/2".into()),
        "format",
    );
    manifest_err(Manifest::from_json("[1, 2"), "not JSON");
    manifest_err(
        parse_edited(&m, |v| {
            v["tensors"][1]["parts"][0]["offset"] = (m.tensors[1].parts[0].offset + 8).into()
        }),
        "aligned",
    );
    manifest_err(
        parse_edited(&m, |v| v["tensors"][1]["parts"][0]["offset"] = 0.into()),
        "overlap",
    );
    manifest_err(
        parse_edited(&m, |v| {
            v["tensors"][3]["parts"][0]["offset"] = serde_json::json!(1u64 << 40)
        }),
        "past the stream end",
    );
    manifest_err(
        parse_edited(&m, |v| {
            v["tensors"][0]["shape"] = serde_json::json!([1u64 << 40, 1u64 << 40])
        }),
        "too large",
    );
    manifest_err(
        parse_edited(&m, |v| v["tensors"][2]["parts"][0]["bytes"] = 255.into()),
        "needs 256",
    );
    manifest_err(
        parse_edited(&m, |v| {
            v["tensors"][2]["shape"] = serde_json::json!([4, 64])
        }),
        "needs",
    );
    manifest_err(
        parse_edited(&m, |v| v["tensors"][0]["parts"][0]["name"] = "codes".into()),
        "parts",
    );
    manifest_err(
        parse_edited(&m, |v| v["shards"][0]["file"] = "../x.bin".into()),
        "plain file",
    );
    manifest_err(
        parse_edited(&m, |v| v["shards"][0]["sha256"] = "00".into()),
        "hex",
    );
    manifest_err(
        parse_edited(&m, |v| v["shards"][0]["bytes"] = (SHARD_MAX + 1).into()),
        "bytes",
    );
    manifest_err(
        parse_edited(&m, |v| v["tensors"][1]["name"] = "a.f32".into()),
        "repeated",
    );
}

#[test]
fn writer_rejects_mismatched_parts_and_shard_sizes() {
    let tmp = TempDir::new("writer");
    let inv = |r: crate::error::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    let mut w = PackageWriter::create(&tmp.0, config()).unwrap();
    assert!(inv(w.add_tensor(
        "x",
        DType::F32,
        &[4],
        &[("data", &[0; 15])]
    )));
    assert!(inv(w.add_tensor(
        "x",
        DType::Q4g64,
        &[1, 64],
        &[("data", &[0; 40])]
    )));
    assert!(inv(w.add_tensor(
        "x",
        DType::Q4g64,
        &[1, 32],
        &[("codes", &[0; 16]), ("qparams", &[0; 2])]
    )));
    assert!(inv(w.add_tensor(
        "x",
        DType::Q8g32,
        &[1, 48],
        &[("codes", &[0; 48]), ("scales", &[0; 4])]
    )));
    assert!(inv(w.add_tensor(
        "x",
        DType::Q8g32,
        &[1, 96],
        &[("codes", &[0; 96]), ("scales", &[0; 6])]
    )));
    w.add_tensor("x", DType::F32, &[4], &[("data", &[0; 16])])
        .unwrap();
    assert!(
        inv(w.add_tensor("x", DType::F32, &[4], &[("data", &[0; 16])])),
        "repeated name"
    );
    assert!(w.with_shard_size(1000).is_err(), "after data was written");
    let w = PackageWriter::create(&tmp.0, config()).unwrap();
    assert!(w.with_shard_size(SHARD_MAX + 1).is_err());
}

#[test]
fn default_shards_never_exceed_32_mib() {
    // A 70 MB tensor with the default shard size: two full 32 MiB shards and the rest.
    let tmp = TempDir::new("big");
    let data = vec![0x5Au8; 70_000_000];
    let mut w = PackageWriter::create(&tmp.0, config()).unwrap();
    w.add_tensor("big", DType::F32, &[data.len() / 4], &[("data", &data)])
        .unwrap();
    let m = w.finish().unwrap();
    let sizes: Vec<u64> = m.shards.iter().map(|s| s.bytes).collect();
    assert_eq!(
        sizes,
        vec![SHARD_MAX, SHARD_MAX, 70_000_000 - 2 * SHARD_MAX]
    );
}
