//! Claims: a package streamed shard by shard (in reverse order, in odd-sized pieces)
//! through `ShardReader` into `StreamedTensors` loads into the same fast model as the
//! package read from disk (identical logits), with Q4 g64 and with Q8 g32 matrices (the
//! latter kept exactly: the browser's CPU backend runs them as stored); a chunk outside
//! the package and a second read of a tensor are typed errors.

use super::StreamedTensors;
use crate::convert::{convert, ConvertOptions};
use crate::cpu::fast::{FastModel, Precision};
use crate::cpu::MemorySource;
use crate::error::Error;
use crate::format::package::{Chunk, Manifest, ShardReader};
use crate::format::package_source::PackageSource;
use crate::format::ModelSource;
use crate::quant::{MergeStats, WeightFormat};
use crate::ModelConfig;

fn package(name: &str, weights: WeightFormat) -> (std::path::PathBuf, Manifest) {
    let config = ModelConfig::from_hf_json(
        r#"{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
            "intermediate_size": 192, "vocab_size": 300}"#,
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("pocketrt-stream-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut src = MemorySource::random(config, 3, 0.1).unwrap();
    let opts = ConvertOptions {
        shard_bytes: Some(16 * 1024),
        weights,
        ..ConvertOptions::default()
    };
    let report = convert(&mut src, &dir, &opts, &mut |_| {}).unwrap();
    (dir, report.manifest)
}

fn logits(model: &FastModel, tokens: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(8).unwrap();
    let mut out = vec![];
    for &t in tokens {
        out = model.forward(t, &mut cache).unwrap();
    }
    out
}

/// `dir`'s package streamed shard by shard, last first, in pieces of odd sizes.
fn streamed(dir: &std::path::Path, manifest: &Manifest) -> StreamedTensors {
    let mut streamed = StreamedTensors::new(manifest).unwrap();
    for index in (0..manifest.shards.len()).rev() {
        let bytes = std::fs::read(dir.join(&manifest.shards[index].file)).unwrap();
        let mut reader = ShardReader::new(manifest, index).unwrap();
        let mut error = None;
        for piece in bytes.chunks(1000 + index) {
            reader
                .feed(piece, &mut |c| {
                    if let Err(e) = streamed.write(c) {
                        error = Some(e);
                    }
                })
                .unwrap();
        }
        reader.finish().unwrap();
        assert!(error.is_none(), "{error:?}");
    }
    streamed
}

#[test]
fn a_streamed_package_loads_the_same_model_as_the_package_on_disk() {
    for weights in [WeightFormat::Q4, WeightFormat::Q8] {
        let (dir, manifest) = package(&format!("same-{weights:?}"), weights);
        assert!(manifest.shards.len() > 2, "the test needs several shards");
        let mut stream = streamed(&dir, &manifest);
        let held = stream.bytes();
        assert_eq!(
            held,
            manifest.tensors.iter().map(|t| t.bytes()).sum::<u64>()
        );
        let keep = WeightFormat::Keep;
        let fast = FastModel::load_as(&mut stream, Precision::Int8, keep).unwrap();
        assert_eq!(stream.bytes(), 0, "every tensor's bytes were handed over");
        let mut disk = PackageSource::open(&dir).unwrap();
        let on_disk = FastModel::load_as(&mut disk, Precision::Int8, keep).unwrap();
        let tokens = [1, 7, 299, 42];
        assert_eq!(
            logits(&fast, &tokens),
            logits(&on_disk, &tokens),
            "{weights:?}"
        );

        // Each matrix read as stored is kept exactly, read in the other format quantized.
        let name = "blk.1.ffn_down.weight";
        let mut stream = streamed(&dir, &manifest);
        let (groups, stats, other) = match weights {
            WeightFormat::Q8 => {
                let (q, stats) = stream.read_q8(name).unwrap();
                assert_eq!(q, disk.read_q8(name).unwrap().0);
                let other = stream.read_q4("blk.0.ffn_down.weight").unwrap().1;
                (q.groups(), stats, other)
            }
            _ => {
                let (q, stats) = stream.read_q4(name).unwrap();
                assert_eq!(q, disk.read_q4(name).unwrap().0);
                let other = stream.read_q8("blk.0.ffn_down.weight").unwrap().1;
                (q.qparams.len(), stats, other)
            }
        };
        assert_eq!(stats, MergeStats::exact(groups), "{weights:?}");
        assert_eq!(
            (other.groups_exact, other.groups_requantized > 0),
            (0, true)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn bad_chunks_and_second_reads_are_errors() {
    let (dir, manifest) = package("bad", WeightFormat::Q4);
    let mut streamed = StreamedTensors::new(&manifest).unwrap();
    let far = Chunk {
        tensor: 0,
        part: 0,
        offset: manifest.tensors[0].parts[0].bytes - 1,
        bytes: &[0, 0],
    };
    assert!(matches!(streamed.write(far), Err(Error::Manifest(_))));
    let missing = Chunk {
        tensor: manifest.tensors.len(),
        part: 0,
        offset: 0,
        bytes: &[0],
    };
    assert!(matches!(streamed.write(missing), Err(Error::Manifest(_))));
    let name = "blk.0.attn_norm.weight";
    assert_eq!(streamed.read_f32(name).unwrap().len(), 128);
    let again = streamed.read_f32(name).unwrap_err().to_string();
    assert!(again.contains("read already"), "{again}");
    std::fs::remove_dir_all(&dir).unwrap();
}
