//! The snapshot's bytes (little-endian):
//!
//! ```text
//! file    = MAGIC (8) | version u32 | header_len u32 | header JSON | crc32(header JSON)
//!           record*
//! record  = tag (4) | payload_len u64 | payload
//! "KV01"  = start u32 | count u32 | tokens (count × u32) | crc32(start, count, tokens)
//!           | rows (count × bytes_per_position) | crc32(rows)
//! "META"  = JSON | crc32(JSON)
//! ```
//!
//! A `KV01` record sets the history from position `start` on (a save after a rollback
//! starts before the end of what the file holds); the last `META` record wins. Rows are
//! laid out per layer, K then V, each a plane of `count` positions as the backend stores
//! them: [`crate::engine::RowKind::F32`] `[position][kv_dim]` f32 (the CPU backends),
//! [`crate::engine::RowKind::F16Heads`] `[kv head][position][head_dim]` f16 (the GPU cache).

use crate::engine::KvLayout;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

pub const MAGIC: [u8; 8] = *b"PKRTSESS";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The header's `format` field.
pub const FORMAT: &str = "pocketrt-session";

const TAG_KV: [u8; 4] = *b"KV01";
const TAG_META: [u8; 4] = *b"META";
/// Largest header or meta JSON read (a hostile length is refused before allocating).
const MAX_JSON: usize = 64 << 20;

/// What a snapshot belongs to and how its rows are stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// Hex SHA-256 of the model ([`super::model_fingerprint`]).
    pub model: String,
    /// Hex SHA-256 of the tokenizer's vocabulary ([`super::tokenizer_fingerprint`]).
    pub tokenizer: String,
    /// Where the rows are valid, bit for bit: the backend and its arithmetic
    /// (`cpu/int8`, `reference/f32`, `gpu/<profile>/<adapter>`).
    pub backend: String,
    pub layout: KvLayout,
    /// Positions of the cache that wrote it.
    pub context: usize,
    /// The context policy: `None` an error when full, `Some(keep)` the sliding window
    /// that keeps the first `keep` tokens.
    pub sliding_window_keep: Option<usize>,
}

/// A parsed snapshot: its header, history, the rows of every position (as ranges of the
/// file's bytes) and the last meta record.
#[derive(Debug)]
pub struct Snapshot {
    pub header: Header,
    pub tokens: Vec<u32>,
    pub meta: Option<String>,
    /// Why the rows cannot be used although the tokens can (a rows checksum failed).
    pub rows_corrupt: Option<String>,
    /// The file ends inside a record (a save cut short): what is missing. The records
    /// before it are read (a restore uses them only when asked to fall back).
    pub truncated: Option<String>,
    data: Vec<u8>,
    /// Disjoint, in order, covering `0..tokens.len()`.
    segments: Vec<Segment>,
}

/// Positions of a record still in the history: the first `count` of the `stored` whose
/// rows start at `offset` (a later record that starts inside it cuts it short).
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: usize,
    count: usize,
    stored: usize,
    offset: usize,
}

fn crc(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// The file's first bytes: magic, version, header.
pub fn encode_header(header: &Header) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("a header serializes");
    let mut out = Vec::with_capacity(json.len() + 20);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&crc(&[&json]).to_le_bytes());
    out
}

/// A record setting the history from `start` on to `tokens`, with their `rows`.
pub fn encode_kv(start: usize, tokens: &[u32], rows: &[u8]) -> Vec<u8> {
    let head: Vec<u8> = [start as u32, tokens.len() as u32]
        .iter()
        .chain(tokens)
        .flat_map(|t| t.to_le_bytes())
        .collect();
    let payload = head.len() + 4 + rows.len() + 4;
    let mut out = Vec::with_capacity(payload + 12);
    out.extend_from_slice(&TAG_KV);
    out.extend_from_slice(&(payload as u64).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(&crc(&[&head]).to_le_bytes());
    out.extend_from_slice(rows);
    out.extend_from_slice(&crc(&[rows]).to_le_bytes());
    out
}

/// A meta record (JSON text the front end keeps with the session: the chat).
pub fn encode_meta(json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 16);
    out.extend_from_slice(&TAG_META);
    out.extend_from_slice(&(json.len() as u64 + 4).to_le_bytes());
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(&crc(&[json.as_bytes()]).to_le_bytes());
    out
}

/// A cursor over the file's bytes whose every read is bounds-checked.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    what: &'a str,
}

impl<'a> Reader<'a> {
    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::SessionCorrupt {
            what: self.what.to_string(),
            detail: detail.into(),
        }
    }

    fn take(&mut self, n: usize, part: &str) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(self.corrupt(format!(
                "truncated: {part} needs {n} bytes at offset {}, the file has {}",
                self.at,
                self.data.len()
            )));
        };
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self, part: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, part)?.try_into().unwrap()))
    }

    /// `bytes` then its CRC-32; false when the checksum fails.
    fn checked(&mut self, n: usize, part: &str) -> Result<(&'a [u8], bool)> {
        let bytes = self.take(n, part)?;
        let sum = self.u32(part)?;
        Ok((bytes, crc(&[bytes]) == sum))
    }
}

impl Header {
    /// The header at the start of a snapshot file's bytes (`data` may be just its
    /// beginning), checked as [`Snapshot::parse`] checks it; and where the records begin.
    pub fn read(data: &[u8], what: &str) -> Result<(Header, usize)> {
        let mut r = Reader { data, at: 0, what };
        let header = read_header(&mut r)?;
        Ok((header, r.at))
    }
}

fn read_header(r: &mut Reader<'_>) -> Result<Header> {
    let what = r.what;
    if r.take(8, "the magic")? != MAGIC {
        return Err(Error::SessionMismatch {
            what: what.into(),
            detail: "not a pocketrt session snapshot (bad magic)".into(),
        });
    }
    let version = r.u32("the version")?;
    if version != VERSION {
        return Err(Error::SessionMismatch {
            what: what.into(),
            detail: format!("format version {version}; this pocketrt reads version {VERSION}"),
        });
    }
    let len = r.u32("the header length")? as usize;
    if len > MAX_JSON {
        return Err(r.corrupt(format!("a header of {len} bytes")));
    }
    let (json, ok) = r.checked(len, "the header")?;
    if !ok {
        return Err(r.corrupt("the header's checksum fails"));
    }
    let header: Header =
        serde_json::from_slice(json).map_err(|e| r.corrupt(format!("the header: {e}")))?;
    if header.format != FORMAT {
        return Err(r.corrupt(format!("the header's format is {:?}", header.format)));
    }
    Ok(header)
}

impl Snapshot {
    /// Parse a whole snapshot file; `what` names it in errors. Checks the magic, the
    /// version, every length against the file and the layout, and every checksum.
    pub fn parse(data: Vec<u8>, what: &str) -> Result<Snapshot> {
        let mut r = Reader {
            data: &data,
            at: 0,
            what,
        };
        let header = read_header(&mut r)?;
        let per_position = header.layout.bytes_per_position();
        let mut tokens = Vec::new();
        let mut segments: Vec<Segment> = Vec::new();
        let (mut meta, mut rows_corrupt, mut truncated) = (None, None, None);
        while r.at < data.len() {
            let at = r.at;
            let framed = data.len() - at >= 12;
            let tag: [u8; 4] = data[at..(at + 4).min(data.len())]
                .try_into()
                .unwrap_or([0; 4]);
            let payload =
                framed.then(|| u64::from_le_bytes(data[at + 4..at + 12].try_into().unwrap()));
            let payload = payload
                .and_then(|p| usize::try_from(p).ok())
                .filter(|&p| p <= data.len() - at - 12);
            let Some(payload) = payload else {
                // A save cut short: the records before it stand.
                truncated = Some(format!(
                    "truncated: its last {} bytes (from offset {at}) are an incomplete record",
                    data.len() - at
                ));
                break;
            };
            r.at = at + 12;
            let end = r.at + payload;
            match tag {
                TAG_KV => {
                    let at = r.at;
                    let start = r.u32("a record's start")? as usize;
                    let count = r.u32("a record's count")? as usize;
                    let ids = count
                        .checked_mul(4)
                        .filter(|&b| b <= payload)
                        .ok_or_else(|| r.corrupt(format!("a record of {count} tokens")))?;
                    r.at = at;
                    let (head, ok) = r.checked(8 + ids, "a record's tokens")?;
                    if !ok {
                        return Err(r.corrupt(format!(
                            "the tokens of the record at offset {at} fail their checksum"
                        )));
                    }
                    if start > tokens.len() {
                        return Err(r.corrupt(format!(
                            "a record starts at position {start} after {} tokens",
                            tokens.len()
                        )));
                    }
                    let rows_len = header
                        .layout
                        .bytes_for(count)
                        .filter(|&b| b.checked_add(8 + ids + 8) == Some(payload))
                        .ok_or_else(|| {
                            r.corrupt(format!(
                                "a record of {count} positions has {payload} bytes, \
                                 {per_position} per position expected"
                            ))
                        })?;
                    let offset = r.at;
                    let (_, ok) = r.checked(rows_len, "a record's rows")?;
                    if !ok && rows_corrupt.is_none() {
                        rows_corrupt = Some(format!(
                            "the KV rows of positions {start}..{} fail their checksum",
                            start + count
                        ));
                    }
                    tokens.truncate(start);
                    tokens.extend(
                        head[8..]
                            .chunks_exact(4)
                            .map(|b| u32::from_le_bytes(b.try_into().unwrap())),
                    );
                    segments.retain(|s| s.start < start);
                    if let Some(last) = segments.last_mut() {
                        last.count = last.count.min(start - last.start);
                    }
                    segments.push(Segment {
                        start,
                        count,
                        stored: count,
                        offset,
                    });
                }
                TAG_META => {
                    let (json, ok) = r.checked(payload.saturating_sub(4), "the meta record")?;
                    let text = std::str::from_utf8(json).ok().filter(|_| ok);
                    let text = text.ok_or_else(|| r.corrupt("the meta record's checksum fails"))?;
                    meta = Some(text.to_string());
                }
                other => {
                    return Err(r.corrupt(format!(
                        "an unknown record {:?} at offset {}",
                        String::from_utf8_lossy(&other),
                        r.at - 12
                    )))
                }
            }
            if r.at != end {
                return Err(r.corrupt(format!("a record's length ends at {end}, not {}", r.at)));
            }
        }
        segments.retain(|s| s.count > 0);
        Ok(Snapshot {
            header,
            tokens,
            meta,
            rows_corrupt,
            truncated,
            data,
            segments,
        })
    }

    /// The rows of every position, as spans `(start, count, rows)` in order, each laid
    /// out as a record stores `count` positions: what a backend writes into its cache to
    /// hold the history again.
    pub fn rows(&self) -> impl Iterator<Item = (usize, usize, Cow<'_, [u8]>)> + '_ {
        let layout = self.header.layout;
        let run = layout.bytes_per_position() / layout.runs();
        self.segments.iter().map(move |s| {
            let stored = &self.data[s.offset..s.offset + s.stored * run * layout.runs()];
            let rows = if s.count == s.stored {
                Cow::Borrowed(stored)
            } else {
                // Each run keeps its first `count` positions.
                let runs = stored.chunks_exact(s.stored * run);
                Cow::Owned(runs.flat_map(|r| &r[..s.count * run]).copied().collect())
            };
            (s.start, s.count, rows)
        })
    }

    /// Bytes of the file.
    pub fn file_bytes(&self) -> usize {
        self.data.len()
    }
}
