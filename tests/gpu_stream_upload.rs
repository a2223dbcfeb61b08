//! The browser loader's GPU path, natively: a package streamed chunk by chunk (odd chunk
//! sizes, small shards, shards in reverse order) through `ShardReader` into
//! `StreamedWeights` decodes exactly like `GpuModel::load` from the same package, with the
//! async decode step; bad manifests fail before any upload.

mod gpu_common;

use gpu_common::gpu;
use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::error::Error;
use pocketrt::format::open;
use pocketrt::format::package::{DType, Manifest, ShardReader};
use pocketrt::gpu::stream_upload::StreamedWeights;
use pocketrt::gpu::GpuModel;
use pocketrt::quant::WeightFormat;
use pocketrt::sampler::Sampler;
use std::path::{Path, PathBuf};

const CONTEXT: usize = 32;
const STEPS: usize = 12;

/// The tiny Qwen3 fixture converted to a package with 20,000-byte shards.
fn package(name: &str) -> (tempdir::Dir, Manifest) {
    package_as(name, WeightFormat::Q4)
}

/// [`package`] with its matrices as `weights` holds them.
fn package_as(name: &str, weights: WeightFormat) -> (tempdir::Dir, Manifest) {
    let out = tempdir::Dir::new(name);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/qwen3");
    let opts = ConvertOptions {
        shard_bytes: Some(20_000),
        weights,
        ..Default::default()
    };
    let report = convert(&mut *open(&src).unwrap(), &out.0, &opts, &mut |_| {}).unwrap();
    assert!(report.manifest.shards.len() > 3, "several shards");
    (out, report.manifest)
}

/// Stream every shard of `dir` (last first) in chunks of `chunk` bytes.
fn stream(dir: &Path, manifest: &Manifest, chunk: usize) -> pocketrt::Result<GpuModel> {
    let ctx = gpu();
    let weights = StreamedWeights::allocate(ctx, manifest)?;
    for index in (0..manifest.shards.len()).rev() {
        let bytes = std::fs::read(dir.join(&manifest.shards[index].file)).unwrap();
        let mut reader = ShardReader::new(manifest, index)?;
        let mut writer = weights.writer(ctx);
        for c in bytes.chunks(chunk) {
            reader.feed(c, &mut |part| writer.write(part))?;
        }
        reader.finish()?;
        writer.finish()?;
    }
    let config = weights.config().clone();
    GpuModel::with_weights(ctx.clone(), config, weights.finish()?, CONTEXT)
}

fn greedy_async(model: &mut GpuModel) -> Vec<u32> {
    let mut tokens = vec![1u32];
    for pos in 0..STEPS {
        let next = pollster::block_on(model.decode_async(tokens[pos], pos)).unwrap();
        tokens.push(next);
    }
    tokens
}

#[test]
fn streamed_package_decodes_like_the_disk_upload() {
    let (dir, manifest) = package("stream_same");
    let mut disk = GpuModel::load(gpu().clone(), &mut *open(&dir.0).unwrap(), CONTEXT).unwrap();
    let mut want = vec![1u32];
    for pos in 0..STEPS {
        want.push(disk.decode(want[pos], pos).unwrap());
    }
    for chunk in [4093, 65_536, 7] {
        let mut model = stream(&dir.0, &manifest, chunk).unwrap();
        assert_eq!(greedy_async(&mut model), want, "chunk size {chunk}");
    }
}

/// A package of Q8 g32 matrices streams into the GPU's Q8 buffers (its vocabulary table
/// included) and decodes like the disk upload of the same package, as stored.
#[test]
fn streamed_q8_package_decodes_like_the_disk_upload() {
    let (dir, manifest) = package_as("stream_q8", WeightFormat::Q8);
    let src = &mut *open(&dir.0).unwrap();
    let keep = WeightFormat::Keep;
    let mut disk =
        GpuModel::load_as(gpu().clone(), src, CONTEXT, keep, Default::default()).unwrap();
    assert_eq!(disk.weights_summary(), "9 q8");
    let mut want = vec![1u32];
    for pos in 0..STEPS {
        want.push(disk.decode(want[pos], pos).unwrap());
    }
    let mut model = stream(&dir.0, &manifest, 4093).unwrap();
    assert_eq!(model.weights_summary(), "9 q8");
    assert_eq!(greedy_async(&mut model), want);
}

/// A stack that mixes Q4 g64 and Q8 g32 tensors (q|k|v of a `keep` package whose v alone
/// was Q8) cannot be streamed to the GPU as stored: a typed error naming the stack,
/// before any upload.
#[test]
fn a_stack_mixing_q4_and_q8_is_refused_before_upload() {
    let (_dir, mut manifest) = package("stream_mixed");
    let (_q8_dir, q8) = package_as("stream_mixed_q8", WeightFormat::Q8);
    let v = index_of(&manifest, "blk.1.attn_v.weight");
    manifest.tensors[v] = q8.tensors[index_of(&q8, "blk.1.attn_v.weight")].clone();
    let err = StreamedWeights::allocate_for(gpu(), &manifest.config, &manifest.tensors)
        .err()
        .unwrap();
    let check = StreamedWeights::check_stacks(&manifest.config, &manifest.tensors);
    for e in [err, check.unwrap_err()] {
        assert!(
            matches!(&e, Error::Unsupported { what, .. } if what == "blk.1.qkv"),
            "{e}"
        );
        assert!(e.to_string().contains("--weights q4 or q8"), "{e}");
    }
}

#[test]
fn async_topk_and_logits_agree_with_the_blocking_step() {
    let (dir, manifest) = package("stream_topk");
    let mut model = stream(&dir.0, &manifest, 10_000).unwrap();
    let (top, _) =
        pollster::block_on(model.decode_topk_async(3, 0, &mut Sampler::greedy())).unwrap();
    let logits = pollster::block_on(model.decode_logits_async(3, 0)).unwrap();
    let (token, want) = model.decode_with_logits(3, 0).unwrap();
    assert_eq!(logits, want);
    assert_eq!(top[0].0, token);
}

#[test]
fn a_missing_or_mistyped_tensor_fails_before_upload() {
    let (_dir, manifest) = package("stream_bad");
    let mut missing = manifest.clone();
    let i = index_of(&missing, "blk.1.ffn_down.weight");
    missing.tensors[i].name = "blk.1.ffn_down.other".into();
    let err = StreamedWeights::allocate(gpu(), &missing).err().unwrap();
    assert!(
        matches!(err, Error::MissingTensor(ref n) if n == "blk.1.ffn_down.weight"),
        "{err}"
    );

    // A matrix stored as f16 values (its codes part relabelled): not streamable.
    let mut mistyped = manifest.clone();
    let t = index_of(&mistyped, "blk.0.attn_q.weight");
    let mut codes = mistyped.tensors[t].parts[0].clone();
    codes.name = "data".into();
    mistyped.tensors[t].shape = vec![codes.bytes as usize / 2];
    mistyped.tensors[t].dtype = DType::F16;
    mistyped.tensors[t].parts = vec![codes];
    let err = StreamedWeights::allocate(gpu(), &mistyped).err().unwrap();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");

    // A norm vector of the wrong length.
    let mut short = manifest.clone();
    let t = index_of(&short, "blk.0.attn_norm.weight");
    short.tensors[t].shape = vec![32];
    short.tensors[t].parts[0].bytes = 128;
    let err = StreamedWeights::allocate(gpu(), &short).err().unwrap();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
}

fn index_of(m: &Manifest, name: &str) -> usize {
    m.tensors.iter().position(|t| t.name == name).unwrap()
}

#[test]
fn a_corrupt_shard_is_reported_by_the_reader_and_a_rewrite_repairs_it() {
    let (dir, manifest) = package("stream_corrupt");
    let ctx = gpu();
    let weights = StreamedWeights::allocate(ctx, &manifest).unwrap();
    let mut bad = std::fs::read(dir.0.join(&manifest.shards[0].file)).unwrap();
    bad[300] ^= 0xff;
    let mut reader = ShardReader::new(&manifest, 0).unwrap();
    let mut writer = weights.writer(ctx);
    reader.feed(&bad, &mut |c| writer.write(c)).unwrap();
    writer.finish().unwrap();
    assert!(matches!(
        reader.finish(),
        Err(Error::ShardHashMismatch { .. })
    ));
    // Writing every shard (shard 0 again, good bytes) gives the correct model.
    for index in 0..manifest.shards.len() {
        let bytes = std::fs::read(dir.0.join(&manifest.shards[index].file)).unwrap();
        let mut reader = ShardReader::new(&manifest, index).unwrap();
        let mut writer = weights.writer(ctx);
        reader.feed(&bytes, &mut |c| writer.write(c)).unwrap();
        reader.finish().unwrap();
        writer.finish().unwrap();
    }
    let mut model = GpuModel::with_weights(
        ctx.clone(),
        manifest.config.clone(),
        weights.finish().unwrap(),
        CONTEXT,
    )
    .unwrap();
    let mut disk = GpuModel::load(ctx.clone(), &mut *open(&dir.0).unwrap(), CONTEXT).unwrap();
    assert_eq!(
        greedy_async(&mut model)[1..],
        (0..STEPS)
            .scan(1u32, |t, pos| {
                *t = disk.decode(*t, pos).unwrap();
                Some(*t)
            })
            .collect::<Vec<_>>()[..]
    );
}

/// A temporary folder, removed on drop (no tempfile dependency).
mod tempdir {
    pub struct Dir(pub std::path::PathBuf);

    impl Dir {
        pub fn new(name: &str) -> Dir {
            let p = std::env::temp_dir().join(format!("pocketrt-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
