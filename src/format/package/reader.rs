//! Reading a package: the streaming [`ShardReader`] (for `fetch()` bodies in the browser, or
//! files) and the disk helpers built on it.

use super::{hex, Manifest};
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes of one tensor part, found in a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// Index into `Manifest::tensors`.
    pub tensor: usize,
    /// Index into that tensor's `parts`.
    pub part: usize,
    /// Offset of `bytes` within the part.
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// A part's range in the logical stream.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: u64,
    end: u64,
    tensor: usize,
    part: usize,
}

/// Streams one shard: feed it the shard's bytes in chunks of any size, in order; it emits
/// the tensor bytes they contain (padding is skipped) and checks size and sha256.
///
/// **Emitted bytes are unverified until [`ShardReader::finish`] succeeds.** A consumer that
/// uploads them right away (the browser writes them straight to GPU buffers) must treat a
/// `finish` error as "this shard's bytes are bad": re-fetch the shard and feed it again.
pub struct ShardReader {
    file: String,
    expected_sha256: String,
    /// Stream offset of the shard's first byte.
    start: u64,
    /// Declared size.
    len: u64,
    received: u64,
    hasher: Sha256,
    /// Parts overlapping this shard, in stream order.
    segments: Vec<Segment>,
    /// First segment that may still receive bytes.
    next: usize,
}

impl ShardReader {
    /// A reader for shard `index` of `manifest` (which is validated here too, so a
    /// hand-built manifest cannot make the reader misbehave).
    pub fn new(manifest: &Manifest, index: usize) -> Result<ShardReader> {
        manifest.validate()?;
        let range = manifest.shard_range(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "shard {index} of a package with {} shards",
                manifest.shards.len()
            ))
        })?;
        let mut segments: Vec<Segment> = Vec::new();
        for (tensor, t) in manifest.tensors.iter().enumerate() {
            for (part, p) in t.parts.iter().enumerate() {
                let (start, end) = (p.offset, p.offset + p.bytes);
                if start < range.end && end > range.start {
                    segments.push(Segment {
                        start,
                        end,
                        tensor,
                        part,
                    });
                }
            }
        }
        segments.sort_unstable_by_key(|s| s.start);
        let shard = &manifest.shards[index];
        Ok(ShardReader {
            file: shard.file.clone(),
            expected_sha256: shard.sha256.clone(),
            start: range.start,
            len: shard.bytes,
            received: 0,
            hasher: Sha256::new(),
            segments,
            next: 0,
        })
    }

    /// The shard's file name.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Bytes fed so far (for progress).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The shard's declared size.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Feed the next bytes of the shard. Bytes beyond the declared size are an error
    /// (`ShardSizeMismatch`), and nothing of that chunk is emitted.
    pub fn feed(&mut self, chunk: &[u8], emit: &mut impl FnMut(Chunk<'_>)) -> Result<()> {
        let total = self.received.saturating_add(chunk.len() as u64);
        if total > self.len {
            return Err(Error::ShardSizeMismatch {
                shard: self.file.clone(),
                expected: self.len,
                found: total,
            });
        }
        self.hasher.update(chunk);
        let chunk_start = self.start + self.received;
        let chunk_end = self.start + total;
        let mut pos = chunk_start;
        while pos < chunk_end {
            while self.segments.get(self.next).is_some_and(|s| s.end <= pos) {
                self.next += 1;
            }
            let Some(seg) = self.segments.get(self.next) else {
                break; // only padding is left in this shard
            };
            if seg.start >= chunk_end {
                break; // padding up to the next part
            }
            let from = pos.max(seg.start);
            let to = chunk_end.min(seg.end);
            emit(Chunk {
                tensor: seg.tensor,
                part: seg.part,
                offset: from - seg.start,
                bytes: &chunk[(from - chunk_start) as usize..(to - chunk_start) as usize],
            });
            pos = to;
        }
        self.received = total;
        Ok(())
    }

    /// Check that the whole shard arrived and its sha256 matches the manifest.
    pub fn finish(self) -> Result<()> {
        if self.received != self.len {
            return Err(Error::ShardSizeMismatch {
                shard: self.file,
                expected: self.len,
                found: self.received,
            });
        }
        let found = hex(&self.hasher.finalize());
        if found != self.expected_sha256 {
            return Err(Error::ShardHashMismatch {
                shard: self.file,
                expected: self.expected_sha256,
                found,
            });
        }
        Ok(())
    }
}

/// Stream one shard file through a `ShardReader`.
fn stream_shard_file(
    dir: &Path,
    manifest: &Manifest,
    index: usize,
    emit: &mut impl FnMut(Chunk<'_>),
) -> Result<()> {
    let mut reader = ShardReader::new(manifest, index)?;
    let path = dir.join(reader.file());
    let mut file = File::open(&path).map_err(|e| Error::io(&path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| Error::io(&path, e))?;
        if n == 0 {
            break;
        }
        reader.feed(&buf[..n], emit)?;
    }
    reader.finish()
}

/// Read a whole package from disk through [`ShardReader`]s, shard by shard. `emit` sees
/// every tensor byte; a shard's bytes count only if this returns `Ok` (see `ShardReader`).
pub fn read_package(dir: impl AsRef<Path>, mut emit: impl FnMut(Chunk<'_>)) -> Result<Manifest> {
    let dir = dir.as_ref();
    let manifest = Manifest::read(dir)?;
    for index in 0..manifest.shards.len() {
        stream_shard_file(dir, &manifest, index, &mut emit)?;
    }
    Ok(manifest)
}

/// One tensor's bytes (its parts concatenated in manifest order), every shard it touches
/// hash-checked first. For many tensors use [`PackageDir`], which checks each shard once.
pub fn load_tensor(dir: impl AsRef<Path>, manifest: &Manifest, name: &str) -> Result<Vec<u8>> {
    PackageDir::new(dir, manifest.clone()).load_tensor(name)
}

/// A package folder on disk: each shard is hash-checked (streamed through a
/// `ShardReader`) the first time a tensor needs it; tensors are then read directly.
pub struct PackageDir {
    dir: PathBuf,
    manifest: Manifest,
    verified: Vec<bool>,
}

impl PackageDir {
    /// Read `dir/manifest.json`.
    pub fn open(dir: impl AsRef<Path>) -> Result<PackageDir> {
        let manifest = Manifest::read(dir.as_ref())?;
        Ok(PackageDir::new(dir, manifest))
    }

    pub fn new(dir: impl AsRef<Path>, manifest: Manifest) -> PackageDir {
        let verified = vec![false; manifest.shards.len()];
        PackageDir {
            dir: dir.as_ref().to_path_buf(),
            manifest,
            verified,
        }
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tokenizer.json text the manifest names, if any.
    pub fn tokenizer_json(&self) -> Result<Option<String>> {
        let Some(file) = &self.manifest.tokenizer else {
            return Ok(None);
        };
        let path = self.dir.join(file);
        std::fs::read_to_string(&path)
            .map(Some)
            .map_err(|e| Error::io(&path, e))
    }

    /// Hash-check shard `index` (once).
    pub fn verify_shard(&mut self, index: usize) -> Result<()> {
        if !self.verified.get(index).copied().unwrap_or(false) {
            stream_shard_file(&self.dir, &self.manifest, index, &mut |_| {})?;
            self.verified[index] = true;
        }
        Ok(())
    }

    /// One tensor's bytes: its parts concatenated in manifest order (for q4g64, `codes`
    /// then `qparams`; split at `parts[0].bytes`).
    pub fn load_tensor(&mut self, name: &str) -> Result<Vec<u8>> {
        let entry = self
            .manifest
            .tensor(name)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))?
            .clone();
        // Pieces (shard, offset in shard, length); shards verified before any allocation.
        let mut pieces = Vec::new();
        for p in &entry.parts {
            let (start, end) = (p.offset, p.offset + p.bytes);
            for index in 0..self.manifest.shards.len() {
                let Some(r) = self.manifest.shard_range(index) else {
                    continue;
                };
                if start < r.end && end > r.start && p.bytes > 0 {
                    self.verify_shard(index)?;
                    let from = start.max(r.start);
                    pieces.push((index, from - r.start, end.min(r.end) - from));
                }
            }
        }
        let mut out = Vec::with_capacity(entry.bytes() as usize);
        for (index, offset, len) in pieces {
            let path = self.dir.join(&self.manifest.shards[index].file);
            let io = |e| Error::io(&path, e);
            let mut file = File::open(&path).map_err(io)?;
            file.seek(SeekFrom::Start(offset)).map_err(io)?;
            let at = out.len();
            out.resize(at + len as usize, 0);
            file.read_exact(&mut out[at..]).map_err(io)?;
        }
        Ok(out)
    }
}
