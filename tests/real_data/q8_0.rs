//! The Q8_0 GGUF llama.cpp's `llama-quantize --allow-requantize IN OUT Q8_0` makes from the
//! real coder GGUF, made here without llama.cpp (CI has none): the same tensor order,
//! metadata and Q8_0 rounding, so the bytes are llama.cpp's (tests/q8_0_real.rs checks the
//! SHA-256 against tests/fixtures/q8_0/reference.json, which llama.cpp's quantizer wrote).
//!
//! What llama-quantize does for ftype MOSTLY_Q8_0 on this model, and so this file:
//! - tensors in llama.cpp's loader order (`weight_name_comparer`): by the `N` of a
//!   `blk.N.` prefix (none counts as -1, i.e. first), then by name;
//! - every tensor of ≥ 2 dims whose name ends in `weight` becomes Q8_0: already-Q8_0 data
//!   is copied, any other type is dequantized to f32 (ggml's exact dequantization) and
//!   quantized by `quantize_row_q8_0_ref` (`Q8Tensor::quantize` rounds the same way);
//!   the rest (norms, biases: F32) is copied;
//! - the source's metadata in its order, then `general.quantization_version` = 2 and
//!   `general.file_type` = 7 (MOSTLY_Q8_0), moved to the end (ggml's `gguf_set_val_*`
//!   removes a key and appends it); the same alignment.
#![allow(dead_code)]

use super::coder_gguf;
use pocketrt::format::gguf::{GgmlType, Gguf, MetaValue, TensorInfo};
use pocketrt::format::gguf_dequant;
use pocketrt::format::gguf_write::GgufWriter;
use pocketrt::quant::{Q8Tensor, Q8_GROUP};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// ggml's `LLAMA_FTYPE_MOSTLY_Q8_0`.
const MOSTLY_Q8_0: u32 = 7;
/// ggml's `GGML_QNT_VERSION`.
const QNT_VERSION: u32 = 2;
const QNT_VERSION_KEY: &str = "general.quantization_version";
const FILE_TYPE_KEY: &str = "general.file_type";
/// Rows quantized at a time (bounds the f32 scratch: the embedding has 151936 rows).
const CHUNK_ROWS: usize = 4096;

/// The SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> String {
    pocketrt::hub::sha256_file(path).unwrap_or_else(|e| panic!("{e}"))
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The layer of a `blk.N.` tensor name, -1 for the others (llama.cpp's `sscanf`).
fn layer(name: &str) -> i64 {
    name.strip_prefix("blk.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
}

/// Whether llama-quantize quantizes this tensor (to Q8_0 here).
fn quantized(t: &TensorInfo) -> bool {
    t.name.ends_with("weight") && t.dims.iter().filter(|&&d| d > 1).count() >= 2
}

/// Row-major f32 values as ggml Q8_0 blocks (f16 scale, then 32 int8 codes each): a Q8
/// g32 group is a Q8_0 block's values.
fn q8_0_blocks(vals: &[f32], rows: usize, cols: usize, out: &mut Vec<u8>) {
    assert_eq!(Q8_GROUP, GgmlType::Q8_0.block_elems());
    let q = Q8Tensor::quantize(vals, rows, cols).unwrap();
    for g in 0..q.groups() {
        out.extend_from_slice(&q.scale_bits(g).to_le_bytes());
        out.extend(q.group_codes(g).iter().map(|&c| c as u8));
    }
}

/// A tensor's data as llama-quantize writes it for MOSTLY_Q8_0.
fn requantize(t: &TensorInfo, bytes: Vec<u8>) -> (GgmlType, Vec<u8>) {
    if !quantized(t) || t.ty == GgmlType::Q8_0 {
        return (t.ty, bytes);
    }
    let cols = t.dims[0] as usize;
    let rows = t.n_elements() as usize / cols;
    let row_bytes = Gguf::row_bytes(t).unwrap() as usize;
    let mut out = Vec::with_capacity(GgmlType::Q8_0.bytes_for(t.n_elements()).unwrap() as usize);
    let mut vals = vec![0f32; CHUNK_ROWS.min(rows) * cols];
    for chunk in bytes.chunks(CHUNK_ROWS * row_bytes) {
        let n = chunk.len() / row_bytes;
        gguf_dequant::dequantize_into(t.ty, chunk, &mut vals[..n * cols]).unwrap();
        q8_0_blocks(&vals[..n * cols], n, cols, &mut out);
    }
    (GgmlType::Q8_0, out)
}

/// Write llama-quantize's Q8_0 requantization of the GGUF `src` to `dst`.
pub fn write_q8_0(src: &Path, dst: &Path) {
    let (g, mut file) = Gguf::open(src).unwrap();
    let mut w = GgufWriter::new();
    // ggml's gguf_set_val_* removes a key and appends it: these two end up last.
    for (key, value) in &g.metadata {
        if key != QNT_VERSION_KEY && key != FILE_TYPE_KEY {
            w.meta(key, value.clone());
        }
    }
    w.meta(QNT_VERSION_KEY, MetaValue::U32(QNT_VERSION));
    w.meta(FILE_TYPE_KEY, MetaValue::U32(MOSTLY_Q8_0));
    let mut order: Vec<&TensorInfo> = g.tensors.iter().collect();
    order.sort_by(|a, b| (layer(&a.name), &a.name).cmp(&(layer(&b.name), &b.name)));
    for t in order {
        let (ty, bytes) = requantize(t, g.read_tensor_bytes(&mut file, t).unwrap());
        w.tensor(&t.name, &t.dims, ty, &bytes).unwrap();
    }
    let tmp = dst.with_extension("tmp");
    let out = std::io::BufWriter::new(std::fs::File::create(&tmp).unwrap());
    w.write_to(out).unwrap();
    std::fs::rename(&tmp, dst).unwrap();
}

/// The Q8_0 GGUF of the real coder model, next to it (`….q8_0.gguf`): reused when its
/// SHA-256 is `expected_sha256`, written (again) otherwise. Returns the path and the
/// file's SHA-256 (which the caller checks: a mismatch means this is not llama.cpp's file).
pub fn coder_q8_0_gguf(expected_sha256: &str) -> (PathBuf, String) {
    let src = coder_gguf();
    let dst = src.with_extension("q8_0.gguf");
    if dst.exists() {
        let sha = sha256_file(&dst);
        if sha == expected_sha256 {
            return (dst, sha);
        }
    }
    let t = std::time::Instant::now();
    write_q8_0(&src, &dst);
    println!("wrote {dst:?} in {:.1} s", t.elapsed().as_secs_f64());
    let sha = sha256_file(&dst);
    (dst, sha)
}

/// Each tensor's name, ggml type id and the SHA-256 of its data, in file order.
pub fn tensor_hashes(path: &Path) -> Vec<(String, u32, String)> {
    let (g, mut file) = Gguf::open(path).unwrap();
    g.tensors
        .iter()
        .map(|t| {
            let bytes = g.read_tensor_bytes(&mut file, t).unwrap();
            (t.name.clone(), t.ty.id(), sha256(&bytes))
        })
        .collect()
}
