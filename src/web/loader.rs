//! Loading a pocket package from a URL into GPU buffers or wasm memory (the backend
//! `backend.rs` chooses): the manifest, then the shards —
//! several at once — each from Cache Storage when it holds a verified copy, else from the
//! network, streamed chunk by chunk through a `ShardReader` (sha256) into the GPU
//! (`StreamedWeights`). A verified network shard is stored in the cache; a cached shard
//! that fails its hash is evicted and fetched; a fetched shard that fails is fetched once
//! more, then the load fails. Shards already cached when a load was interrupted are not
//! fetched again.

use super::backend::{Choice, Decided, Target};
use super::cache::{OverQuota, Record};
use super::fetch::{self, check_abort};
use super::locator::Locator;
use super::model::WebModel;
use super::snapshot::Identity;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::package::{Manifest, ShardReader, MANIFEST_FILE};
use crate::gpu::GpuContext;
use crate::quant::WeightFormat;
use crate::tokenizer::{ChatTemplate, Tokenizer};
use futures_util::future::join_all;
use std::cell::{Cell, RefCell};
use web_sys::{AbortSignal, Cache};

/// Context when the caller names none (bounded by the model's).
const DEFAULT_CONTEXT: usize = 4096;

/// What the caller asked for.
pub struct LoadOptions {
    pub on_progress: Option<js_sys::Function>,
    pub signal: Option<AbortSignal>,
    pub context: Option<usize>,
    /// Shards fetched at once.
    pub parallel: usize,
    /// Cache Storage name; `None`: no caching.
    pub cache_name: Option<String>,
    /// Local files: an object mapping each package file name to a (blob) URL; the model
    /// URL is then only a label.
    pub files: Option<wasm_bindgen::JsValue>,
    /// The model hub's endpoint, for `owner/name` ids.
    pub hub_endpoint: String,
    /// The backend asked for (see `backend.rs`).
    pub backend: Choice,
    /// The device profile forced by name (one of `gpu::profile::PROFILE_NAMES`; `None`:
    /// the one `DeviceProfile::detect` picks). WebGPU only: the CPU backend has none.
    pub profile: Option<String>,
    /// The on-device tuner (`tune`: false → off, undefined → auto, true → on, or "off",
    /// "auto", "on", "force"; `gpu::tune::TunePolicy`).
    pub tune: crate::gpu::tune::TunePolicy,
    /// How a GGUF's matrices are held (`weights`: "q4" | "q8" | "keep", default keep:
    /// as its author quantized them, `WeightFormat`); packages run as stored.
    pub weights: WeightFormat,
    /// No requests at all: every file must be in the cache (`cache.rs`).
    pub offline: bool,
    /// What a load the storage quota cannot hold does.
    pub over_quota: OverQuota,
}

impl LoadOptions {
    /// Whether requests are forbidden (`offline`; local files are read all the same).
    pub fn no_requests(&self) -> bool {
        self.offline && self.files.is_none()
    }
}

/// A loaded model and what it came with.
pub struct Loaded {
    pub model: WebModel,
    pub tokenizer: Tokenizer,
    pub template: Option<ChatTemplate>,
    pub report: LoadReport,
    /// Hex SHA-256 identity of the model (a session snapshot's `model`).
    pub model_id: String,
    /// The pooling of embeddings the model declares (a package's manifest, a GGUF's
    /// `pooling_type`).
    pub pooling: Option<crate::embed::Pooling>,
}

/// How the load went (reported to JS).
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadReport {
    pub shards: usize,
    pub shards_from_cache: usize,
    pub shards_fetched: usize,
    /// Shards whose bytes failed their hash and were loaded again.
    pub shards_refetched: usize,
    pub bytes: u64,
    pub context: usize,
    pub adapter: String,
    /// The device profile's name (`gpu::profile`) whenever a GPU was a candidate (also
    /// when a probe kept the CPU backend); `None` (null) without one.
    pub profile: Option<String>,
    /// Every choice of that profile (`DeviceProfile::to_json`), `forced` included.
    pub profile_detail: Option<serde_json::Value>,
    /// "webgpu" or "cpu", and why (ending with what the on-device tuner did).
    pub backend: String,
    pub backend_reason: String,
    /// The constants the on-device tuner chose (`gpu::tune::Tuned`) and its sweep's table
    /// (`null`: kept from an earlier load); `null` where nothing was tuned.
    pub tuned: Option<serde_json::Value>,
    /// Threads the CPU backend splits its work across (1 in the single-threaded build).
    pub threads: usize,
    /// Where the model came from: "cache", "network" or "cache and network".
    pub source: String,
    /// Small files (hub listing, manifest, tokenizer) read from the cache / the network.
    pub files_from_cache: usize,
    pub files_fetched: usize,
    /// Every `cache.put` that failed (the load went on; those files are fetched again
    /// next time).
    pub cache_errors: Vec<String>,
    /// Why nothing was cached (over the quota with `overQuota: "uncached"`).
    pub uncached: Option<String>,
    pub offline: bool,
}

impl LoadReport {
    /// Record the GPU candidate's adapter and device profile.
    pub(super) fn set_device(&mut self, ctx: &GpuContext) {
        self.adapter = ctx.adapter_label();
        self.profile = Some(ctx.profile.name.to_string());
        self.profile_detail = Some(ctx.profile.to_json());
    }

    /// Set `source` from the counts.
    pub(super) fn set_source(&mut self) {
        let cached = self.shards_from_cache + self.files_from_cache > 0;
        let fetched = self.shards_fetched + self.files_fetched > 0;
        self.source = match (cached, fetched) {
            (true, false) => "cache",
            (false, _) => "network",
            (true, true) => "cache and network",
        }
        .into();
    }
}

/// Shared state of a load and its shard lanes (single-threaded: plain cells).
pub(super) struct Progress<'a> {
    pub opts: &'a LoadOptions,
    pub total: Cell<u64>,
    pub done: Cell<u64>,
    pub report: RefCell<LoadReport>,
    /// The cache files are read from (`None`: no caching).
    pub cache: Option<Cache>,
    /// Whether files are stored in it (false over the quota, `overQuota: "uncached"`).
    pub store: Cell<bool>,
    /// Whether the quota check passed ([`Progress::admit`]); until then what the load
    /// keeps waits in `pending`, so that a load failing first (`QUOTA`, a bad manifest)
    /// stores nothing.
    pub admitted: Cell<bool>,
    pub pending: RefCell<Vec<(String, web_sys::Response, Option<usize>)>>,
}

impl<'a> Progress<'a> {
    pub async fn new(opts: &'a LoadOptions) -> Progress<'a> {
        Progress {
            opts,
            total: Cell::new(0),
            done: Cell::new(0),
            report: RefCell::new(LoadReport {
                offline: opts.offline,
                ..Default::default()
            }),
            cache: super::cache::for_load(opts).await,
            store: Cell::new(true),
            admitted: Cell::new(false),
            pending: RefCell::new(Vec::new()),
        }
    }

    /// Tell the caller: `phase`, bytes done/total, the shard index.
    pub fn emit(&self, phase: &str, shard: Option<usize>) {
        self.emit_with(phase, shard, None);
    }

    /// [`Progress::emit`] with a `message`.
    pub fn emit_with(&self, phase: &str, shard: Option<usize>, message: Option<&str>) {
        let Some(f) = &self.opts.on_progress else {
            return;
        };
        let ev = serde_json::json!({
            "phase": phase,
            "loaded": self.done.get(),
            "total": self.total.get(),
            "shard": shard,
            "shards": self.report.borrow().shards,
            "message": message,
        });
        if let Ok(v) = js_sys::JSON::parse(&ev.to_string()) {
            let _ = f.call1(&wasm_bindgen::JsValue::NULL, &v);
        }
    }
}

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

/// Where the model of `manifest` goes under `opts` (backend, profile, cache), for the
/// context they ask for ([`requested_context`]).
pub(super) async fn decide(manifest: &Manifest, opts: &LoadOptions) -> Result<Decided> {
    let context = requested_context(&manifest.config, opts);
    let (profile, cache) = (opts.profile.as_deref(), opts.cache_name.as_deref());
    Decided::new(opts.backend, profile, manifest, context, cache).await
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
    let config = manifest.config.clone();
    let context = requested_context(&config, &opts);
    let target = Target::new(decide(&manifest, &opts).await?, &manifest, context)?;
    {
        let mut report = progress.report.borrow_mut();
        report.shards = manifest.shards.len();
        report.bytes = manifest.shards.iter().map(|s| s.bytes).sum();
        report.context = target.context();
        report.adapter = target.adapter();
        if let Some(ctx) = target.gpu_context() {
            report.set_device(ctx);
        }
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
    let (model, reason) = target.finish(opts.tune, &progress).await?;
    progress.emit("ready", None);
    let mut report = progress.report.into_inner();
    report.context = model.context();
    report.backend = model.backend().into();
    report.backend_reason = reason;
    report.set_source();
    Ok(Loaded {
        model,
        tokenizer,
        template,
        report,
        model_id: Identity::of_package(&manifest).fingerprint(),
        pooling: manifest.pooling,
    })
}

/// The context the caller asked for, else the default (bounded by the model's).
pub(super) fn requested_context(config: &ModelConfig, opts: &LoadOptions) -> usize {
    opts.context
        .unwrap_or(DEFAULT_CONTEXT.min(config.max_context))
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
