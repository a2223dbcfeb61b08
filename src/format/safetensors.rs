//! HF safetensors reader (single file or sharded with `model.safetensors.index.json`) and
//! the HF-folder `ModelSource`: config.json + safetensors + optional tokenizer files.
//!
//! A safetensors file is `u64 header_len` (LE), a JSON header
//! `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}`, then data.
//! Tensors are read one at a time (seek + read), never the whole file.

use super::source::{
    f16_from_le, f32_from_le, matrix_dims, quantize_counted, ModelSource, SourceTensor,
};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::quant::{MergeStats, Q4Tensor};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Largest JSON header accepted (real headers are well under 10 MB).
const MAX_HEADER: u64 = 100 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StDtype {
    F32,
    F16,
    BF16,
}

impl StDtype {
    fn parse(what: &str, s: &str) -> Result<StDtype> {
        match s {
            "F32" => Ok(StDtype::F32),
            "F16" => Ok(StDtype::F16),
            "BF16" => Ok(StDtype::BF16),
            _ => Err(Error::Unsupported {
                what: what.into(),
                kind: "safetensors dtype",
                name: s.into(),
                supported: "F32, F16, BF16",
            }),
        }
    }
    pub fn size(self) -> usize {
        match self {
            StDtype::F32 => 4,
            StDtype::F16 | StDtype::BF16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            StDtype::F32 => "f32",
            StDtype::F16 => "f16",
            StDtype::BF16 => "bf16",
        }
    }
}

/// One tensor of a safetensors file: absolute byte range in `file`.
#[derive(Clone, Debug)]
pub struct StTensor {
    pub name: String,
    pub dtype: StDtype,
    pub shape: Vec<usize>,
    pub file: PathBuf,
    pub start: u64,
    pub len: u64,
}

/// Parse the header of one safetensors file, validating every range against its length.
pub fn read_header(path: &Path) -> Result<Vec<StTensor>> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let file_len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    parse_header(&mut f, file_len, path)
}

/// [`read_header`] of the file `path` of `file_len` bytes, read from `f` (its start).
pub fn parse_header(f: &mut impl Read, file_len: u64, path: &Path) -> Result<Vec<StTensor>> {
    let what = path.display().to_string();
    let truncated = |needed| Error::ModelTruncated {
        what: what.clone(),
        needed,
        available: file_len,
    };
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(|_| truncated(8))?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_HEADER {
        return Err(Error::corrupt(
            &what,
            format!("header length {header_len} is absurd"),
        ));
    }
    let data_start = 8 + header_len;
    if data_start > file_len {
        return Err(truncated(data_start));
    }
    let mut header = vec![0u8; header_len as usize];
    f.read_exact(&mut header).map_err(|e| Error::io(path, e))?;
    let json: serde_json::Value = serde_json::from_slice(&header)
        .map_err(|e| Error::corrupt(&what, format!("header is not JSON: {e}")))?;
    let obj = json
        .as_object()
        .ok_or_else(|| Error::corrupt(&what, "header is not a JSON object"))?;
    let mut out = Vec::with_capacity(obj.len());
    for (name, v) in obj {
        if name == "__metadata__" {
            continue;
        }
        let bad = |d: &str| Error::corrupt(&what, format!("tensor {name}: {d}"));
        let dtype = StDtype::parse(&what, v["dtype"].as_str().ok_or_else(|| bad("no dtype"))?)?;
        let shape: Vec<usize> = v["shape"]
            .as_array()
            .ok_or_else(|| bad("no shape"))?
            .iter()
            .map(|d| {
                d.as_u64()
                    .map(|d| d as usize)
                    .ok_or_else(|| bad("bad shape"))
            })
            .collect::<Result<_>>()?;
        let offs = v["data_offsets"]
            .as_array()
            .ok_or_else(|| bad("no data_offsets"))?;
        let (begin, end) = match (
            offs.first().and_then(|x| x.as_u64()),
            offs.get(1).and_then(|x| x.as_u64()),
        ) {
            (Some(b), Some(e)) if b <= e => (b, e),
            _ => return Err(bad("bad data_offsets")),
        };
        let n = shape
            .iter()
            .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64))
            .ok_or_else(|| bad("shape overflows"))?;
        if n != end - begin {
            return Err(bad(&format!(
                "shape {shape:?} needs {n} bytes, data_offsets give {}",
                end - begin
            )));
        }
        let abs_end = data_start
            .checked_add(end)
            .ok_or_else(|| bad("offset overflows"))?;
        if abs_end > file_len {
            return Err(truncated(abs_end));
        }
        out.push(StTensor {
            name: name.clone(),
            dtype,
            shape,
            file: path.to_path_buf(),
            start: data_start + begin,
            len: end - begin,
        });
    }
    Ok(out)
}

/// Read a tensor's bytes and convert them to f32.
pub fn read_tensor_f32(t: &StTensor) -> Result<Vec<f32>> {
    let mut f = File::open(&t.file).map_err(|e| Error::io(&t.file, e))?;
    f.seek(SeekFrom::Start(t.start))
        .map_err(|e| Error::io(&t.file, e))?;
    let mut bytes = vec![0u8; t.len as usize];
    f.read_exact(&mut bytes)
        .map_err(|e| Error::io(&t.file, e))?;
    Ok(match t.dtype {
        StDtype::F32 => f32_from_le(&bytes),
        StDtype::F16 => f16_from_le(&bytes),
        StDtype::BF16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
    })
}

/// Write f32 tensors as one safetensors file (tests and tools).
pub fn write_f32(path: &Path, tensors: &[(&str, Vec<usize>, &[f32])]) -> Result<()> {
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, shape, data) in tensors {
        let end = offset + 4 * data.len() as u64;
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let mut bytes =
        serde_json::to_vec(&header).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    while bytes.len() % 8 != 0 {
        bytes.push(b' ');
    }
    let mut out = (bytes.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&bytes);
    for (_, _, data) in tensors {
        out.extend_from_slice(bytemuck::cast_slice(data));
    }
    std::fs::write(path, out).map_err(|e| Error::io(path, e))
}

/// HF tensor name → canonical (llama.cpp) name; `None` for tensors the runtime does not use.
pub fn canonical_name(hf: &str) -> Option<String> {
    let fixed = match hf {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, kind) = rest.rsplit_once('.')?;
    let short = match module {
        "input_layernorm" => "attn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "post_attention_layernorm" => "ffn_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    Some(format!("blk.{layer}.{short}.{kind}"))
}

/// An HF model folder: config.json, model.safetensors (or an index + shards), and
/// optionally tokenizer.json / tokenizer_config.json.
pub struct HfSource {
    dir: PathBuf,
    config: ModelConfig,
    tensors: Vec<SourceTensor>,
    by_name: HashMap<String, StTensor>,
    chat_template: Option<String>,
    pooling: Option<super::pooling::Pooling>,
}

impl HfSource {
    pub fn open(dir: &Path) -> Result<HfSource> {
        let read = |name: &str| -> Result<String> {
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(|e| Error::io(p, e))
        };
        let config = ModelConfig::from_hf_json(&read("config.json")?)?;
        let files = safetensors_files(dir)?;
        let mut tensors = Vec::new();
        let mut by_name = HashMap::new();
        for file in files {
            for t in read_header(&file)? {
                let Some(name) = canonical_name(&t.name) else {
                    continue;
                };
                if name == "output.weight" && config.tie_embeddings {
                    continue;
                }
                tensors.push(SourceTensor {
                    name: name.clone(),
                    shape: t.shape.clone(),
                    dtype: t.dtype.name().to_string(),
                    bytes: t.len,
                });
                by_name.insert(name, t);
            }
        }
        tensors.sort_by_key(|t| tensor_order(&t.name));
        let chat_template = read("tokenizer_config.json")
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["chat_template"].as_str().map(str::to_string));
        Ok(HfSource {
            dir: dir.to_path_buf(),
            config,
            tensors,
            by_name,
            chat_template,
            pooling: super::pooling::Pooling::of_sentence_transformers(dir)?,
        })
    }

    fn get(&self, name: &str) -> Result<&StTensor> {
        self.by_name
            .get(name)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }
}

/// The model's safetensors files: those named by the index, else `*.safetensors`.
fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if let Ok(text) = std::fs::read_to_string(&index) {
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::corrupt(index.display().to_string(), e.to_string()))?;
        let map = v["weight_map"]
            .as_object()
            .ok_or_else(|| Error::missing(index.display().to_string(), "weight_map"))?;
        let mut files: Vec<PathBuf> = map
            .values()
            .filter_map(|f| f.as_str())
            .map(|f| dir.join(f))
            .collect();
        files.sort();
        files.dedup();
        return Ok(files);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::missing(dir.display().to_string(), "*.safetensors"));
    }
    Ok(files)
}

/// Sort key putting tensors in model order (embedding, layers in order, norm, head).
pub fn tensor_order(name: &str) -> (usize, String) {
    match name.strip_prefix("blk.").and_then(|r| r.split_once('.')) {
        Some((l, rest)) => (1 + l.parse::<usize>().unwrap_or(0), rest.to_string()),
        None if name.starts_with("token_embd") => (0, name.to_string()),
        None => (usize::MAX, name.to_string()),
    }
}

impl ModelSource for HfSource {
    fn config(&self) -> &ModelConfig {
        &self.config
    }
    fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }
    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        read_tensor_f32(self.get(name)?)
    }
    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)> {
        let t = self.get(name)?;
        let (rows, cols) = matrix_dims(name, &t.shape)?;
        quantize_counted(&read_tensor_f32(t)?, rows, cols)
    }
    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        let p = self.dir.join("tokenizer.json");
        match std::fs::read_to_string(&p) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(p, e)),
        }
    }
    fn chat_template(&self) -> Option<String> {
        self.chat_template.clone()
    }
    fn pooling(&self) -> Option<super::pooling::Pooling> {
        self.pooling
    }
    fn container(&self) -> String {
        "HF safetensors".to_string()
    }
}
