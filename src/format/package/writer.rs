//! `PackageWriter`: streams tensor parts into one logical byte stream, cut into shard
//! files of exactly `shard_size` bytes (the last one shorter), each hashed as it is written.

use super::{
    hex, shard_file_name, DType, Manifest, Part, ShardEntry, TensorEntry, ALIGN, FORMAT,
    MANIFEST_FILE, SHARD_MAX, TOKENIZER_FILE,
};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The shard being written.
struct OpenShard {
    path: PathBuf,
    file: BufWriter<File>,
    hasher: Sha256,
    bytes: u64,
}

/// Writes a pocket package into a folder. Call [`PackageWriter::finish`] at the end: until
/// then there is no manifest and the folder is not a package.
pub struct PackageWriter {
    dir: PathBuf,
    config: ModelConfig,
    shard_size: u64,
    tokenizer: Option<String>,
    chat_template: Option<String>,
    pooling: Option<crate::format::pooling::Pooling>,
    tensors: Vec<TensorEntry>,
    shards: Vec<ShardEntry>,
    /// Position in the logical stream.
    pos: u64,
    open: Option<OpenShard>,
}

impl PackageWriter {
    /// Start a package in `dir` (created if needed) with shards of [`SHARD_MAX`] bytes.
    pub fn create(dir: impl AsRef<Path>, config: ModelConfig) -> Result<PackageWriter> {
        config.validate("package config")?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(PackageWriter {
            dir,
            config,
            shard_size: SHARD_MAX,
            tokenizer: None,
            chat_template: None,
            pooling: None,
            tensors: Vec::new(),
            shards: Vec::new(),
            pos: 0,
            open: None,
        })
    }

    /// Cut shards at `bytes` instead of [`SHARD_MAX`] (1..=SHARD_MAX; before any tensor).
    pub fn with_shard_size(mut self, bytes: u64) -> Result<PackageWriter> {
        if bytes == 0 || bytes > SHARD_MAX {
            return Err(Error::InvalidArgument(format!(
                "shard size {bytes} is outside 1..={SHARD_MAX}"
            )));
        }
        if self.pos != 0 {
            return Err(Error::InvalidArgument(
                "the shard size must be set before any tensor is added".into(),
            ));
        }
        self.shard_size = bytes;
        Ok(self)
    }

    /// Write the tokenizer as `tokenizer.json` in the package.
    pub fn set_tokenizer(&mut self, json: &str) -> Result<()> {
        let path = self.dir.join(TOKENIZER_FILE);
        std::fs::write(&path, json).map_err(|e| Error::io(&path, e))?;
        self.tokenizer = Some(TOKENIZER_FILE.to_string());
        Ok(())
    }

    pub fn set_chat_template(&mut self, template: Option<String>) {
        self.chat_template = template;
    }

    /// The pooling of embeddings the model declares ([`Manifest::pooling`]).
    pub fn set_pooling(&mut self, pooling: Option<crate::format::pooling::Pooling>) {
        self.pooling = pooling;
    }

    /// Append a tensor. `parts` are `(part name, bytes)` in the order its dtype requires
    /// (`data` for f32/f16; `codes`, `qparams` for q4g64), sized for `shape`.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        parts: &[(&str, &[u8])],
    ) -> Result<()> {
        let invalid = |detail: String| Error::InvalidArgument(format!("tensor {name}: {detail}"));
        if name.is_empty() || self.tensors.iter().any(|t| t.name == name) {
            return Err(invalid("the name is empty or already used".into()));
        }
        let expected = dtype.expected_parts(shape).map_err(invalid)?;
        let matches = expected.len() == parts.len()
            && expected
                .iter()
                .zip(parts)
                .all(|((n, b), (pn, pb))| n == pn && *b == pb.len() as u64);
        if !matches {
            let want: Vec<String> = expected.iter().map(|(n, b)| format!("{n}:{b}")).collect();
            let got: Vec<String> = parts
                .iter()
                .map(|(n, b)| format!("{n}:{}", b.len()))
                .collect();
            return Err(invalid(format!(
                "{} {shape:?} needs parts [{}], got [{}]",
                dtype.name(),
                want.join(", "),
                got.join(", ")
            )));
        }
        let mut stored = Vec::with_capacity(parts.len());
        for (part_name, bytes) in parts {
            self.pad_to_alignment()?;
            stored.push(Part {
                name: part_name.to_string(),
                offset: self.pos,
                bytes: bytes.len() as u64,
            });
            self.write(bytes)?;
        }
        self.tensors.push(TensorEntry {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            parts: stored,
        });
        Ok(())
    }

    /// Close the last shard and write `manifest.json`.
    pub fn finish(mut self) -> Result<Manifest> {
        self.close_shard()?;
        let manifest = Manifest {
            format: FORMAT.to_string(),
            config: self.config,
            tokenizer: self.tokenizer,
            chat_template: self.chat_template,
            pooling: self.pooling,
            tensors: self.tensors,
            shards: self.shards,
        };
        manifest.validate()?;
        let path = self.dir.join(MANIFEST_FILE);
        std::fs::write(&path, manifest.to_json()?).map_err(|e| Error::io(&path, e))?;
        Ok(manifest)
    }

    /// Zero bytes up to the next multiple of `ALIGN`.
    fn pad_to_alignment(&mut self) -> Result<()> {
        const ZEROS: [u8; ALIGN as usize] = [0; ALIGN as usize];
        let pad = (ALIGN - self.pos % ALIGN) % ALIGN;
        self.write(&ZEROS[..pad as usize])
    }

    /// Append to the stream, opening and closing shards at `shard_size` boundaries.
    fn write(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let shard = match &mut self.open {
                Some(s) => s,
                None => {
                    let path = self.dir.join(shard_file_name(self.shards.len()));
                    let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
                    self.open.insert(OpenShard {
                        path,
                        file: BufWriter::with_capacity(1 << 20, file),
                        hasher: Sha256::new(),
                        bytes: 0,
                    })
                }
            };
            let room = self.shard_size - shard.bytes;
            let n = room.min(data.len() as u64) as usize;
            let (now, rest) = data.split_at(n);
            shard
                .file
                .write_all(now)
                .map_err(|e| Error::io(&shard.path, e))?;
            shard.hasher.update(now);
            shard.bytes += n as u64;
            self.pos += n as u64;
            data = rest;
            if shard.bytes == self.shard_size {
                self.close_shard()?;
            }
        }
        Ok(())
    }

    /// Flush the open shard (if any) and record its entry.
    fn close_shard(&mut self) -> Result<()> {
        let Some(shard) = self.open.take() else {
            return Ok(());
        };
        shard
            .file
            .into_inner()
            .map_err(|e| Error::io(&shard.path, e.into_error()))?;
        self.shards.push(ShardEntry {
            file: shard_file_name(self.shards.len()),
            bytes: shard.bytes,
            sha256: hex(&shard.hasher.finalize()),
        });
        Ok(())
    }
}
