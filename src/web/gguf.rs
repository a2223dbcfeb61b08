//! Loading a GGUF URL. The file is read in order, in pieces of 32 MiB (HTTP range
//! requests): the header is parsed from the first bytes, then every byte streams through a
//! [`GgufStream`] — tensors converted on the fly exactly as the native converter does, to
//! Q4 g64 (Q4_1 pairs losslessly) or Q8 g32 (Q8_0 exactly) as the `weights` option says
//! (default keep: as its author quantized them) — into the backend's buffers: the GPU's
//! (the wasm heap then holds the header and one batch of rows) or the CPU model's. The
//! backend is chosen as for a package, once the header tells the converted tensor table
//! (`GgufStream::manifest`, [`Decided`]): `auto` takes WebGPU on a real GPU and the CPU
//! backend without WebGPU or, for Q8 matrices, on a software adapter. Each piece is stored in Cache Storage under its
//! own key (`URL?pocketrt-piece=N`), so a second load reads the pieces with no network and
//! an interrupted load fetches only the pieces it lacks. A server that ignores ranges
//! (answers 200) is read in one go and cached as one piece. The tokenizer and chat
//! template come from the GGUF metadata.
//!
//! GGUF has no hashes: a cached piece is checked by its length only.

use super::backend::{decide, Decided, Target};
use super::cache::Record;
use super::fetch::{self, Body};
use super::load::{Loaded, Progress};
use super::options::LoadOptions;
use super::snapshot::Identity;
use crate::error::{Error, Result};
use crate::format::gguf_stream::{header_from_prefix, GgufStream};
use crate::format::package::SHARD_MAX;
use crate::tokenizer::{ChatTemplate, Tokenizer};
use web_sys::{Cache, Response};

/// Bytes per range request and cache entry (the package's shard size: Safari's cache
/// copes with it).
const PIECE: u64 = SHARD_MAX;
/// Headers of a cached piece: the file's size, and the piece size it was cut with.
const TOTAL_HEADER: &str = "x-pocketrt-total";
const PIECE_HEADER: &str = "x-pocketrt-piece";

/// Does `url` name a GGUF file?
pub fn is_gguf(url: &str) -> bool {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.to_ascii_lowercase().ends_with(".gguf")
}

/// How the file is cut into pieces.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// The file's size, when the server says.
    total: Option<u64>,
    /// Bytes per piece; `None`: one piece, the whole file (no range support).
    piece: Option<u64>,
}

impl Layout {
    fn count(&self) -> usize {
        match (self.piece, self.total) {
            (Some(p), Some(t)) => t.div_ceil(p) as usize,
            _ => 1,
        }
    }

    /// The inclusive byte range of piece `index`.
    fn range(&self, index: usize) -> Option<(u64, u64)> {
        let (p, t) = (self.piece?, self.total?);
        let start = index as u64 * p;
        Some((start, (start + p).min(t) - 1))
    }

    /// Bytes of piece `index`, when known.
    fn len(&self, index: usize) -> Option<u64> {
        match self.range(index) {
            Some((a, b)) => Some(b - a + 1),
            None => self.total.filter(|_| self.piece.is_none()),
        }
    }
}

/// Where the stream's bytes go: the header until it is complete, then the converter.
/// (One per load, so the size difference between the variants does not matter.)
#[allow(clippy::large_enum_variant)]
enum Sink {
    Header(Vec<u8>),
    Tensors { stream: GgufStream, target: Target },
}

impl Sink {
    fn done(&self) -> bool {
        matches!(self, Sink::Tensors { stream, .. } if stream.done())
    }
}

/// Everything loading the pieces needs.
struct GgufLoad<'a> {
    url: &'a str,
    opts: &'a LoadOptions,
    progress: Progress<'a>,
    layout: Option<Layout>,
}

/// Load the GGUF file at `url` (`record`: what the cache keeps of the model; its pieces
/// are added once the first piece tells the layout).
pub async fn load(url: &str, progress: Progress<'_>, mut record: Record) -> Result<Loaded> {
    let opts = progress.opts;
    let mut load = GgufLoad {
        url,
        opts,
        progress,
        layout: None,
    };
    let mut sink = Sink::Header(Vec::new());
    let mut index = 0;
    while !sink.done() && load.layout.is_none_or(|l| index < l.count()) {
        load.piece(index, &mut sink).await?;
        if index == 0 {
            if let Some(layout) = load.layout {
                for i in 0..layout.count() {
                    let bytes = layout.len(i).unwrap_or(0);
                    record.shards.push((piece_key(url, i), bytes));
                }
            }
            load.progress.admit(&mut record).await?;
        }
        index += 1;
    }
    let Sink::Tensors { stream, target } = sink else {
        return Err(Error::corrupt(url, "the file ends inside its GGUF header"));
    };
    stream.finish()?;
    load.progress.emit("tokenizer", None);
    let tokenizer = Tokenizer::from_gguf(stream.gguf())?;
    let template = stream
        .gguf()
        .get_str("tokenizer.chat_template")
        .map(ChatTemplate::new)
        .transpose()?;
    let config = stream.config().clone();
    let total = load.layout.and_then(|l| l.total);
    let model_id = Identity::of_gguf(stream.gguf().version, &config, stream.tensors(), total);
    let pooling = crate::embed::Pooling::from_gguf(stream.gguf());
    let built = target.finish(load.opts.tune, &load.progress).await?;
    let model_id = model_id.fingerprint();
    Ok(load
        .progress
        .finish(built, tokenizer, template, model_id, pooling))
}

impl GgufLoad<'_> {
    /// Stream piece `index` into `sink`, from the cache or the network (then cached).
    async fn piece(&mut self, index: usize, sink: &mut Sink) -> Result<()> {
        let key = piece_key(self.url, index);
        let cached = match self.progress.cache.clone() {
            Some(cache) => self.cached_piece(&cache, &key).await,
            None => None,
        };
        let from_cache = cached.is_some();
        let response = match cached {
            Some(r) => r,
            None if self.opts.no_requests() => return Err(Error::NotCached { url: key }),
            None => self.fetch(index).await?,
        };
        let layout = self.layout.ok_or_else(|| Error::Fetch {
            url: self.url.to_string(),
            detail: "the file's layout is unknown".into(),
        })?;
        self.progress
            .emit(if from_cache { "cache" } else { "download" }, Some(index));
        let storing = self.progress.cache.is_some() && self.progress.store.get();
        let copy = match (storing, from_cache, layout.total) {
            (true, false, Some(_)) => response.clone().ok(),
            _ => None,
        };
        let mut body = Body::new(self.url, &response)?;
        let pumped = self.pump(&mut body, sink).await;
        if pumped.is_err() || sink.done() {
            body.cancel();
        }
        let got = pumped?;
        if let Some(want) = layout.len(index).filter(|&w| w != got && !sink.done()) {
            if let (Some(cache), true) = (&self.progress.cache, from_cache) {
                fetch::evict(cache, &key).await; // the next load fetches it again
            }
            return Err(Error::ShardSizeMismatch {
                shard: format!("{} piece {index}", self.url),
                expected: want,
                found: got,
            });
        }
        if let Some(stored) = copy.and_then(|c| cacheable(&c, layout)) {
            self.progress.keep(&key, &stored, Some(index)).await;
        }
        let mut report = self.progress.report.borrow_mut();
        match from_cache {
            true => report.shards_from_cache += 1,
            false => report.shards_fetched += 1,
        }
        Ok(())
    }

    /// Feed the body to `sink` until it ends (or every tensor is converted); its length.
    async fn pump(&self, body: &mut Body, sink: &mut Sink) -> Result<u64> {
        let mut got = 0u64;
        let total = self.layout.and_then(|l| l.total);
        while let Some(bytes) = body.next(self.opts.signal.as_ref()).await? {
            got += bytes.len() as u64;
            let done = &self.progress.done;
            done.set(done.get() + bytes.len() as u64);
            match sink {
                Sink::Header(buf) => {
                    buf.extend_from_slice(bytes);
                    if let Some(gguf) = header_from_prefix(buf, total, self.url)? {
                        let prefix = std::mem::take(buf);
                        let stream = GgufStream::new_as(gguf, self.url, self.opts.weights)?;
                        *sink = self.prepare(stream).await?;
                        feed(sink, &prefix)?;
                    }
                }
                Sink::Tensors { .. } => feed(sink, bytes)?,
            }
            if sink.done() {
                break;
            }
        }
        Ok(got)
    }

    /// The backend for the model the header describes, chosen as a package's
    /// ([`Decided`]), and its empty buffers.
    async fn prepare(&self, stream: GgufStream) -> Result<Sink> {
        let manifest = stream.manifest();
        let decided: Decided = decide(&manifest, self.opts).await?;
        let target = Target::of_table(decided, &manifest)?;
        target.report_to(&mut self.progress.report.borrow_mut());
        self.progress.emit("manifest", None);
        Ok(Sink::Tensors { stream, target })
    }

    /// A cached piece, if the cache holds one (the first also tells the file's layout).
    async fn cached_piece(&mut self, cache: &Cache, key: &str) -> Option<Response> {
        let response = fetch::cached(cache, key).await?;
        if self.layout.is_none() {
            let header = |name: &str| {
                let v = response.headers().get(name).ok().flatten()?;
                v.parse::<u64>().ok()
            };
            let total = header(TOTAL_HEADER)?;
            let piece = header(PIECE_HEADER).filter(|&p| p > 0 && p < total);
            self.set_layout(Layout {
                total: Some(total),
                piece,
            });
        }
        Some(response)
    }

    /// Fetch piece `index` (the first request also learns the layout).
    async fn fetch(&mut self, index: usize) -> Result<Response> {
        let range = match self.layout {
            None => Some((0, PIECE - 1)),
            Some(l) => l.range(index),
        };
        let signal = self.opts.signal.as_ref();
        let response = fetch::get_range(self.url, range, signal).await?;
        let partial = response.status() == 206;
        match self.layout {
            None if partial => {
                let total = content_range_total(&response).ok_or_else(|| Error::Fetch {
                    url: self.url.to_string(),
                    detail: "a range response without the file size (Content-Range)".into(),
                })?;
                self.set_layout(Layout {
                    total: Some(total),
                    piece: Some(PIECE).filter(|&p| p < total),
                });
            }
            None => {
                let total = response
                    .headers()
                    .get("content-length")
                    .ok()
                    .flatten()
                    .and_then(|v| v.parse().ok());
                self.set_layout(Layout { total, piece: None });
            }
            Some(l) if l.piece.is_some() && !partial => {
                return Err(Error::Fetch {
                    url: self.url.to_string(),
                    detail: format!("HTTP {} to a range request", response.status()),
                })
            }
            Some(_) => {}
        }
        Ok(response)
    }

    fn set_layout(&mut self, layout: Layout) {
        self.layout = Some(layout);
        self.progress.total.set(layout.total.unwrap_or(0));
        let mut report = self.progress.report.borrow_mut();
        report.shards = layout.count();
        report.bytes = layout.total.unwrap_or(0);
    }
}

/// Write `bytes` of the file through the converter to the backend's buffers (no-op while
/// in the header).
fn feed(sink: &mut Sink, bytes: &[u8]) -> Result<()> {
    let Sink::Tensors { stream, target } = sink else {
        return Ok(());
    };
    let mut writer = target.writer();
    stream.feed(bytes, &mut |c| writer.write(c))?;
    writer.finish()
}

/// The cache key of piece `index` of `url`.
fn piece_key(url: &str, index: usize) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}pocketrt-piece={index}")
}

/// The size of the whole file from `Content-Range: bytes a-b/TOTAL`.
fn content_range_total(response: &Response) -> Option<u64> {
    let v = response.headers().get("content-range").ok().flatten()?;
    v.rsplit('/').next()?.trim().parse().ok()
}

/// A 200 response with `response`'s body and the layout headers, for Cache Storage
/// (which refuses 206 responses).
fn cacheable(response: &Response, layout: Layout) -> Option<Response> {
    let headers = web_sys::Headers::new().ok()?;
    headers.set(TOTAL_HEADER, &layout.total?.to_string()).ok()?;
    if let Some(p) = layout.piece {
        headers.set(PIECE_HEADER, &p.to_string()).ok()?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(200);
    init.set_headers(&headers);
    Response::new_with_opt_readable_stream_and_init(response.body().as_ref(), &init).ok()
}
