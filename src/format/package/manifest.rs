//! Manifest parsing and validation: everything a reader relies on (part sizes match the
//! shapes, parts are aligned, disjoint and inside the stream, shard entries are sane) is
//! checked here once, so readers can index without further checks.

use super::{DType, Manifest, Part, TensorEntry, ALIGN, FORMAT, MANIFEST_FILE, SHARD_MAX};
use crate::error::{Error, Result};
use std::collections::HashSet;
use std::ops::Range;
use std::path::Path;

impl DType {
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Q4g64 => "q4g64",
            DType::Q8g32 => "q8g32",
        }
    }

    /// The parts a tensor of this type and row-major `shape` must have, in order:
    /// `(part name, bytes)`. The error says what is wrong with the shape.
    pub fn expected_parts(self, shape: &[usize]) -> Result<Vec<(&'static str, u64)>, String> {
        let overflow = || format!("shape {shape:?} is too large");
        let n = shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(overflow)?;
        let sized = |elem: u64| n.checked_mul(elem).ok_or_else(overflow);
        Ok(match self {
            DType::F32 => vec![("data", sized(4)?)],
            DType::F16 => vec![("data", sized(2)?)],
            DType::Q4g64 => {
                let k = match shape {
                    [_, k] => *k as u64,
                    _ => return Err(format!("q4g64 needs a 2-D shape, got {shape:?}")),
                };
                if k % 64 != 0 {
                    return Err(format!("q4g64 needs K % 64 == 0, got shape {shape:?}"));
                }
                vec![("codes", n / 2), ("qparams", n / 64 * 4)]
            }
            DType::Q8g32 => {
                let k = match shape {
                    [_, k] => *k as u64,
                    _ => return Err(format!("q8g32 needs a 2-D shape, got {shape:?}")),
                };
                if k % 32 != 0 {
                    return Err(format!("q8g32 needs K % 32 == 0, got shape {shape:?}"));
                }
                vec![("codes", n), ("scales", (n / 32).div_ceil(2) * 4)]
            }
        })
    }
}

/// A name that stays inside the package folder / URL prefix.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', ':'])
        && !name.chars().any(char::is_control)
}

fn bad(detail: String) -> Error {
    Error::Manifest(detail)
}

/// Map serde's error for a missing field to `MissingField`, everything else to `Manifest`.
fn from_serde(e: serde_json::Error) -> Error {
    let msg = e.to_string();
    if let Some(rest) = msg.strip_prefix("missing field `") {
        if let Some(field) = rest.split('`').next() {
            return Error::missing(MANIFEST_FILE, field);
        }
    }
    bad(format!("not a valid manifest: {msg}"))
}

impl Manifest {
    /// Parse and validate `manifest.json`.
    pub fn from_json(text: &str) -> Result<Manifest> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("{MANIFEST_FILE} is not JSON: {e}")))?;
        // The format comes first: another version may have other fields.
        match value.get("format") {
            None => return Err(Error::missing(MANIFEST_FILE, "format")),
            Some(serde_json::Value::String(f)) if f == FORMAT => {}
            Some(f) => {
                return Err(bad(format!(
                    "format {f} is not {FORMAT:?} (a package made by another pocketrt version?)"
                )))
            }
        }
        let manifest: Manifest = serde_json::from_value(value).map_err(from_serde)?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Read and validate `dir/manifest.json`.
    pub fn read(dir: impl AsRef<Path>) -> Result<Manifest> {
        let path = dir.as_ref().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        Manifest::from_json(&text)
    }

    /// Pretty JSON, as written to `manifest.json`.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| bad(e.to_string()))
    }

    /// Length of the logical stream: the sum of the shard sizes.
    pub fn stream_len(&self) -> u64 {
        self.shards
            .iter()
            .fold(0u64, |acc, s| acc.saturating_add(s.bytes))
    }

    /// The stream range that shard `index` holds.
    pub fn shard_range(&self, index: usize) -> Option<Range<u64>> {
        let shard = self.shards.get(index)?;
        let start = self.shards[..index]
            .iter()
            .fold(0u64, |acc, s| acc.saturating_add(s.bytes));
        Some(start..start.saturating_add(shard.bytes))
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Check every invariant readers rely on (`from_json` and the writer call this).
    pub fn validate(&self) -> Result<()> {
        if self.format != FORMAT {
            return Err(bad(format!("format {:?} is not {FORMAT:?}", self.format)));
        }
        self.config
            .validate(&format!("{MANIFEST_FILE} config"))
            .map_err(|e| bad(e.to_string()))?;
        if let Some(t) = &self.tokenizer {
            if !is_plain_file_name(t) {
                return Err(bad(format!("tokenizer {t:?} is not a plain file name")));
            }
        }
        let stream_len = self.validate_shards()?;
        let mut names = HashSet::new();
        let mut ranges: Vec<(u64, u64, &str)> = Vec::new();
        for t in &self.tensors {
            if t.name.is_empty() || !names.insert(t.name.as_str()) {
                return Err(bad(format!(
                    "tensor name {:?} is empty or repeated",
                    t.name
                )));
            }
            validate_parts(t, stream_len)?;
            ranges.extend(
                t.parts
                    .iter()
                    .filter(|p| p.bytes > 0)
                    .map(|p| (p.offset, p.offset + p.bytes, t.name.as_str())),
            );
        }
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(bad(format!(
                    "tensors {} and {} overlap in the stream ({}..{} and {}..{})",
                    w[0].2, w[1].2, w[0].0, w[0].1, w[1].0, w[1].1
                )));
            }
        }
        Ok(())
    }

    /// Shard entries are sane; returns the stream length.
    fn validate_shards(&self) -> Result<u64> {
        let mut files = HashSet::new();
        let mut total = 0u64;
        for s in &self.shards {
            if !is_plain_file_name(&s.file) || !files.insert(s.file.as_str()) {
                return Err(bad(format!(
                    "shard file {:?} is not a plain file name, or is repeated",
                    s.file
                )));
            }
            if s.bytes == 0 || s.bytes > SHARD_MAX {
                return Err(bad(format!(
                    "shard {} has {} bytes (must be 1..={SHARD_MAX})",
                    s.file, s.bytes
                )));
            }
            let is_hex = s.sha256.len() == 64
                && s.sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !is_hex {
                return Err(bad(format!(
                    "shard {} sha256 {:?} is not 64 lower-case hex digits",
                    s.file, s.sha256
                )));
            }
            total = total
                .checked_add(s.bytes)
                .ok_or_else(|| bad("shard sizes overflow".into()))?;
        }
        Ok(total)
    }
}

/// The tensor's parts are the ones its dtype needs, sized for its shape, aligned, and
/// inside the stream.
fn validate_parts(t: &TensorEntry, stream_len: u64) -> Result<()> {
    let expected = t
        .dtype
        .expected_parts(&t.shape)
        .map_err(|e| bad(format!("tensor {}: {e}", t.name)))?;
    let names = |parts: &mut dyn Iterator<Item = &str>| parts.collect::<Vec<_>>().join(", ");
    if expected.len() != t.parts.len()
        || expected
            .iter()
            .zip(&t.parts)
            .any(|((n, _), p)| *n != p.name)
    {
        return Err(bad(format!(
            "tensor {} ({}) has parts [{}], expected [{}]",
            t.name,
            t.dtype.name(),
            names(&mut t.parts.iter().map(|p| p.name.as_str())),
            names(&mut expected.iter().map(|(n, _)| *n)),
        )));
    }
    for ((_, bytes), p) in expected.iter().zip(&t.parts) {
        let Part {
            name,
            offset,
            bytes: stored,
        } = p;
        if stored != bytes {
            return Err(bad(format!(
                "tensor {} part {name}: {stored} bytes, shape {:?} needs {bytes}",
                t.name, t.shape
            )));
        }
        if offset % ALIGN != 0 {
            return Err(bad(format!(
                "tensor {} part {name}: offset {offset} is not {ALIGN}-byte aligned",
                t.name
            )));
        }
        if offset
            .checked_add(*stored)
            .is_none_or(|end| end > stream_len)
        {
            return Err(bad(format!(
                "tensor {} part {name}: {offset}+{stored} runs past the stream end {stream_len}",
                t.name
            )));
        }
    }
    Ok(())
}
