//! Loading a pocket package from a URL into GPU buffers or wasm memory (the backend
//! `backend.rs` chooses): the manifest, then the shards —
//! several at once — each from Cache Storage when it holds a verified copy, else from the
//! network, streamed chunk by chunk through a `ShardReader` (sha256) into the GPU
//! (`StreamedWeights`). A verified network shard is stored in the cache; a cached shard
//! that fails its hash is evicted and fetched; a fetched shard that fails is fetched once
//! more, then the load fails. Shards already cached when a load was interrupted are not
//! fetched again.

use super::backend::{decide, Target};
use super::cache::Record;
use super::fetch::{self, check_abort};
use super::load::{LoadReport, Loaded, Progress};
use super::locator::Locator;
use super::options::LoadOptions;
use super::snapshot::Identity;
use crate::error::{Error, Result};
use crate::format::package::{Manifest, ShardReader, MANIFEST_FILE};
use crate::tokenizer::{ChatTemplate, Tokenizer};
use futures_util::future::join_all;
use std::cell::Cell;
use web_sys::AbortSignal;

/// A model's files found: a GGUF file's URL, or a package's manifest and where its files are.
enum Located {
    Gguf(String),
    Package(Manifest, Locator),
}

/// Find the model `name` (a pocket package, a GGUF file or a hub id): the hub resolved,
/// a package's manifest read (its URL kept in `record`).
async fn locate(name: &str, progress: &Progress<'_>, record: &mut Record) -> Result<Located> {
    let opts = progress.opts;
    let url = match opts.files.is_none() && crate::hub::choose::is_hub_id(name) {
        true => super::hub::resolve(name, &opts.hub_endpoint, progress, record).await?,
        false => name.to_string(),
    };
    let url = url.as_str();
    let locator = Locator::new(url, opts.files.clone())?;
    if super::gguf::is_gguf(url) {
        let file = url.rsplit('/').next().unwrap_or(url);
        return Ok(Located::Gguf(match &opts.files {
            Some(_) => locator.url(file)?,
            None => url.to_string(),
        }));
    }
    let manifest_url = locator.manifest()?;
    let manifest = Manifest::from_json(&progress.text(&manifest_url).await?)?;
    record.files.push(manifest_url);
    Ok(Located::Package(manifest, locator))
}

/// The backend a load of `name` with `opts` runs on, decided as [`load`] decides it (the
/// manifest read; on `auto`, a software adapter's probe run or its kept decision taken)
/// with nothing allocated; `None` for a GGUF file (decided once its header is read, on the
/// build that starts the load: the single-threaded one, which runs both). The JS API asks this
/// before it picks a wasm build: a CPU decision, where the page allows threads, is loaded
/// by the threaded build, which cannot run WebGPU.
pub async fn choose_backend(name: &str, opts: LoadOptions) -> Result<Option<BackendChoice>> {
    let progress = Progress::new(&opts).await;
    let mut record = Record::new(name);
    let Located::Package(manifest, _) = locate(name, &progress, &mut record).await? else {
        return Ok(None);
    };
    let d = decide(&manifest, &opts).await?;
    let mut report = LoadReport::default();
    if let Some(ctx) = d.gpu_context() {
        report.set_device(ctx);
    }
    Ok(Some(BackendChoice {
        backend: d.backend().into(),
        reason: d.reason,
        profile: report.profile,
        profile_detail: report.profile_detail,
    }))
}

/// What [`choose_backend`] decided (to JS).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendChoice {
    /// "webgpu" or "cpu".
    pub backend: String,
    pub reason: String,
    /// The GPU candidate's device profile (as [`LoadReport::profile`]).
    pub profile: Option<String>,
    pub profile_detail: Option<serde_json::Value>,
}

/// Load the model `name`: a pocket package (a folder URL or its manifest.json), a GGUF
/// file, or a hub id (`owner/name`). Its files come from the cache or the network
/// (`cache.rs`).
pub async fn load(name: &str, opts: LoadOptions) -> Result<Loaded> {
    let progress = Progress::new(&opts).await;
    let mut record = Record::new(name);
    let (manifest, locator) = match locate(name, &progress, &mut record).await? {
        Located::Gguf(source) => return super::gguf::load(&source, progress, record).await,
        Located::Package(manifest, locator) => (manifest, locator),
    };
    let signal = opts.signal.as_ref();
    let tokenizer_url = match &manifest.tokenizer {
        Some(file) => locator.url(file)?,
        None => return Err(Error::missing(MANIFEST_FILE, "tokenizer")),
    };
    record.files.push(tokenizer_url.clone());
    for s in &manifest.shards {
        record.shards.push((locator.url(&s.file)?, s.bytes));
    }
    progress.admit(&mut record).await?;
    let target = Target::new(decide(&manifest, &opts).await?, &manifest)?;
    {
        let mut report = progress.report.borrow_mut();
        report.shards = manifest.shards.len();
        report.bytes = manifest.shards.iter().map(|s| s.bytes).sum();
        target.report_to(&mut report);
    }
    progress
        .total
        .set(manifest.shards.iter().map(|s| s.bytes).sum());
    progress.emit("manifest", None);
    let shard = Shard {
        manifest: &manifest,
        target: &target,
        locator: &locator,
        progress: &progress,
        signal,
    };
    let lanes = opts.parallel.clamp(1, 8);
    let lane = |first: usize| {
        let shard = &shard;
        async move {
            for index in (first..shard.manifest.shards.len()).step_by(lanes) {
                shard.load(index).await?;
            }
            Ok::<(), Error>(())
        }
    };
    for r in join_all((0..lanes).map(lane)).await {
        r?;
    }
    check_abort(signal)?;
    progress.emit("tokenizer", None);
    let tokenizer = Tokenizer::from_hf_json(&progress.text(&tokenizer_url).await?)?;
    let template = manifest
        .chat_template
        .as_deref()
        .map(ChatTemplate::new)
        .transpose()?;
    let built = target.finish(opts.tune, &progress).await?;
    let model_id = Identity::of_package(&manifest).fingerprint();
    Ok(progress.finish(built, tokenizer, template, model_id, manifest.pooling))
}

/// Everything loading one shard needs.
struct Shard<'a> {
    manifest: &'a Manifest,
    target: &'a Target,
    locator: &'a Locator,
    progress: &'a Progress<'a>,
    signal: Option<&'a AbortSignal>,
}

impl Shard<'_> {
    /// Load shard `index`: from the cache if it holds a good copy, else from the network
    /// (twice at most when the hash fails).
    async fn load(&self, index: usize) -> Result<()> {
        let url = self.locator.url(&self.manifest.shards[index].file)?;
        if let Some(cache) = self.progress.cache.as_ref() {
            if let Some(response) = fetch::cached(cache, &url).await {
                self.progress.emit("cache", Some(index));
                match self.stream(index, &url, &response).await {
                    Ok(()) => {
                        self.progress.report.borrow_mut().shards_from_cache += 1;
                        return Ok(());
                    }
                    Err(Error::ShardHashMismatch { .. } | Error::ShardSizeMismatch { .. }) => {
                        fetch::evict(cache, &url).await;
                        self.progress.report.borrow_mut().shards_refetched += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if self.progress.opts.no_requests() {
            return Err(Error::NotCached { url });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            self.progress.emit("download", Some(index));
            let response = fetch::get(&url, self.signal).await?;
            // A copy for the cache, stored only once the shard is verified.
            let copy = match self.progress.cache.is_some() && self.progress.store.get() {
                true => response.clone().ok(),
                false => None,
            };
            match self.stream(index, &url, &response).await {
                Ok(()) => {
                    if let Some(copy) = copy {
                        self.progress.keep(&url, &copy, Some(index)).await;
                    }
                    self.progress.report.borrow_mut().shards_fetched += 1;
                    return Ok(());
                }
                Err(Error::ShardHashMismatch { .. } | Error::ShardSizeMismatch { .. })
                    if tries == 1 =>
                {
                    self.progress.report.borrow_mut().shards_refetched += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Stream one response through the shard's reader into the GPU.
    async fn stream(&self, index: usize, url: &str, response: &web_sys::Response) -> Result<()> {
        let mut reader = ShardReader::new(self.manifest, index)?;
        let mut writer = self.target.writer();
        let mine = Cell::new(0u64);
        let done = &self.progress.done;
        let result = fetch::stream_body(url, response, self.signal, |bytes| {
            reader.feed(bytes, &mut |c| writer.write(c))?;
            mine.set(mine.get() + bytes.len() as u64);
            done.set(done.get() + bytes.len() as u64);
            Ok(())
        })
        .await
        .and_then(|()| reader.finish())
        .and_then(|()| writer.finish());
        if result.is_err() {
            // These bytes do not count: the shard is loaded again or the load fails.
            done.set(done.get() - mine.get());
        }
        result
    }
}
