//! Loading a pocket package from a URL into GPU buffers or wasm memory (the backend
//! `backend.rs` chooses): the manifest, then the shards —
//! several at once — each from Cache Storage when it holds a verified copy, else from the
//! network, streamed chunk by chunk through a `ShardReader` (sha256) into the GPU
//! (`StreamedWeights`). A verified network shard is stored in the cache; a cached shard
//! that fails its hash is evicted and fetched; a fetched shard that fails is fetched once
//! more, then the load fails. Shards already cached when a load was interrupted are not
//! fetched again.

use super::backend::{Choice, Target};
use super::fetch::{self, check_abort};
use super::model::WebModel;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::package::{Manifest, ShardReader, MANIFEST_FILE};
use crate::gpu::plan::{Budget, MemoryPlan, TABLET_BUDGET};
use crate::gpu::weights::limits_needed;
use crate::gpu::{GpuContext, LimitsNeeded};
use crate::tokenizer::{ChatTemplate, Tokenizer};
use futures_util::future::join_all;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
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
}

/// A loaded model and what it came with.
pub struct Loaded {
    pub model: WebModel,
    pub tokenizer: Tokenizer,
    pub template: Option<ChatTemplate>,
    pub report: LoadReport,
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
    /// "webgpu" or "cpu", and why.
    pub backend: String,
    pub backend_reason: String,
    /// Threads the CPU backend splits its work across (1 in the single-threaded build).
    pub threads: usize,
}

impl LoadReport {
    /// Record the GPU candidate's adapter and device profile.
    pub(super) fn set_device(&mut self, ctx: &GpuContext) {
        self.adapter = ctx.adapter_label();
        self.profile = Some(ctx.profile.name.to_string());
        self.profile_detail = Some(ctx.profile.to_json());
    }
}

/// Shared state of the shard lanes (single-threaded: plain cells).
pub(super) struct Progress<'a> {
    pub opts: &'a LoadOptions,
    pub total: Cell<u64>,
    pub done: Cell<u64>,
    pub report: RefCell<LoadReport>,
}

impl Progress<'_> {
    /// Tell the caller: `phase`, bytes done/total, the shard index.
    pub fn emit(&self, phase: &str, shard: Option<usize>) {
        let Some(f) = &self.opts.on_progress else {
            return;
        };
        let ev = serde_json::json!({
            "phase": phase,
            "loaded": self.done.get(),
            "total": self.total.get(),
            "shard": shard,
            "shards": self.report.borrow().shards,
        });
        if let Ok(v) = js_sys::JSON::parse(&ev.to_string()) {
            let _ = f.call1(&wasm_bindgen::JsValue::NULL, &v);
        }
    }
}

/// Where the package's files are: a URL prefix, or a map of local files.
struct Locator {
    base: String,
    manifest: String,
    files: Option<wasm_bindgen::JsValue>,
}

impl Locator {
    /// The locator of a model `url`: a folder URL, or the URL of its manifest file.
    fn new(url: &str, files: Option<wasm_bindgen::JsValue>) -> Result<Locator> {
        let path = url.split(['?', '#']).next().unwrap_or(url);
        // A last segment with an extension names the manifest file itself.
        let last = path.rsplit('/').next().unwrap_or("");
        let names_file = last.contains('.');
        let base = match names_file {
            true => path[..path.len() - last.len()].to_string(),
            false => format!("{}/", path.trim_end_matches('/')),
        };
        let manifest = match names_file {
            true => url.to_string(),
            false => format!("{base}{MANIFEST_FILE}"),
        };
        Ok(Locator {
            base,
            manifest,
            files,
        })
    }

    /// The manifest's URL.
    fn manifest(&self) -> Result<String> {
        match self.files {
            None => Ok(self.manifest.clone()),
            Some(_) => self.url(MANIFEST_FILE),
        }
    }

    /// The URL of package file `name`.
    pub(super) fn url(&self, name: &str) -> Result<String> {
        match &self.files {
            None => Ok(format!("{}{name}", self.base)),
            Some(files) => js_sys::Reflect::get(files, &name.into())
                .ok()
                .and_then(|v| v.as_string())
                .ok_or_else(|| Error::Fetch {
                    url: name.to_string(),
                    detail: "not among the chosen files".into(),
                }),
        }
    }
}

/// Load the model at `url`: a pocket package (a folder URL or its manifest.json), a GGUF
/// file, or a hub id (`owner/name`).
pub async fn load(url: &str, opts: LoadOptions) -> Result<Loaded> {
    let url = match opts.files.is_none() && crate::hub::choose::is_hub_id(url) {
        true => super::hub::resolve(url, &opts.hub_endpoint, opts.signal.as_ref()).await?,
        false => url.to_string(),
    };
    let url = url.as_str();
    let locator = Locator::new(url, opts.files.clone())?;
    if super::gguf::is_gguf(url) {
        let file = url.rsplit('/').next().unwrap_or(url);
        let source = match &opts.files {
            Some(_) => locator.url(file)?,
            None => url.to_string(),
        };
        return super::gguf::load(&source, &opts).await;
    }
    let manifest_url = locator.manifest()?;
    let signal = opts.signal.as_ref();
    let response = fetch::get(&manifest_url, signal).await?;
    let manifest = Manifest::from_json(&fetch::text(&manifest_url, &response).await?)?;
    let config = manifest.config.clone();
    let context = requested_context(&config, &opts);
    let target = Target::choose(
        opts.backend,
        opts.profile.as_deref(),
        &manifest,
        context,
        opts.cache_name.as_deref(),
    )
    .await?;
    let mut report = LoadReport {
        shards: manifest.shards.len(),
        bytes: manifest.shards.iter().map(|s| s.bytes).sum(),
        context: target.context(),
        adapter: target.adapter(),
        ..Default::default()
    };
    if let Some(ctx) = target.gpu_context() {
        report.set_device(ctx);
    }
    let progress = Progress {
        opts: &opts,
        total: Cell::new(manifest.shards.iter().map(|s| s.bytes).sum()),
        done: Cell::new(0),
        report: RefCell::new(report),
    };
    progress.emit("manifest", None);
    let cache = match &opts.cache_name {
        Some(name) => fetch::open_cache(name).await,
        None => None,
    };
    let shard = Shard {
        manifest: &manifest,
        target: &target,
        locator: &locator,
        cache: cache.as_ref(),
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
    let tokenizer = match &manifest.tokenizer {
        Some(file) => {
            let url = locator.url(file)?;
            let response = fetch::get(&url, signal).await?;
            Tokenizer::from_hf_json(&fetch::text(&url, &response).await?)?
        }
        None => return Err(Error::missing(MANIFEST_FILE, "tokenizer")),
    };
    let template = manifest
        .chat_template
        .as_deref()
        .map(ChatTemplate::new)
        .transpose()?;
    let (model, reason) = target.finish()?;
    progress.emit("ready", None);
    let mut report = progress.report.into_inner();
    report.context = model.context();
    report.backend = model.backend().into();
    report.backend_reason = reason;
    Ok(Loaded {
        model,
        tokenizer,
        template,
        report,
    })
}

thread_local! {
    /// The device of earlier loads, in its detected profile: reused (a new WebGPU device
    /// per load costs seconds on some adapters, and the old one lingers until garbage
    /// collection). A load forcing a profile gets this device and queue in that profile
    /// (`GpuContext::with_profile`), never a context of another profile.
    static DEVICE: std::cell::RefCell<Option<Arc<GpuContext>>> = const { std::cell::RefCell::new(None) };
}

/// The context the caller asked for, else the default (bounded by the model's).
pub(super) fn requested_context(config: &ModelConfig, opts: &LoadOptions) -> usize {
    opts.context
        .unwrap_or(DEFAULT_CONTEXT.min(config.max_context))
}

/// The device, in the profile called `profile` (`None`: detected), and memory plan for
/// `context` positions of a model of `config`.
pub(super) async fn gpu_for(
    config: &ModelConfig,
    context: usize,
    profile: Option<&str>,
) -> Result<(Arc<GpuContext>, MemoryPlan)> {
    let ctx = device(limits_needed(config, context.max(1)), profile).await?;
    let budget = Budget::for_device(TABLET_BUDGET, &ctx);
    let plan = MemoryPlan::choose(config, Some(context), &budget)?;
    Ok((ctx, plan))
}

/// A device with at least the limits `need` asks for (the last one when it has them) in
/// the profile called `profile` (`None`: detected). A profile the adapter cannot run is an
/// `InvalidArgument` error saying what it lacks.
// `GpuModel` shares its device through an `Arc` (as natively); wasm has one thread.
#[allow(clippy::arc_with_non_send_sync)]
pub(super) async fn device(need: LimitsNeeded, profile: Option<&str>) -> Result<Arc<GpuContext>> {
    let fits = |c: &GpuContext| {
        need.max_buffer <= c.limits.max_buffer_size
            && need.max_storage_binding <= c.limits.max_storage_buffer_binding_size
    };
    let detected = match DEVICE.with_borrow(|d| d.clone()).filter(|c| fits(c)) {
        Some(ctx) => ctx,
        None => {
            let ctx = Arc::new(GpuContext::with_profile_name(need, None).await?);
            DEVICE.with_borrow_mut(|d| *d = Some(ctx.clone()));
            ctx
        }
    };
    match profile.map(str::trim).filter(|n| !n.is_empty()) {
        None => Ok(detected),
        Some(name) => Ok(Arc::new(detected.with_profile(name)?)),
    }
}

/// `Err(NoWebGpu)` when the global scope has no `navigator.gpu`.
pub(super) fn require_webgpu() -> Result<()> {
    use js_sys::Reflect;
    let global = js_sys::global();
    let gpu = Reflect::get(&global, &"navigator".into())
        .and_then(|n| Reflect::get(&n, &"gpu".into()))
        .ok();
    match gpu {
        Some(g) if !g.is_undefined() && !g.is_null() => Ok(()),
        _ => Err(Error::NoWebGpu("navigator.gpu is missing".into())),
    }
}

/// Everything loading one shard needs.
struct Shard<'a> {
    manifest: &'a Manifest,
    target: &'a Target,
    locator: &'a Locator,
    cache: Option<&'a Cache>,
    progress: &'a Progress<'a>,
    signal: Option<&'a AbortSignal>,
}

impl Shard<'_> {
    /// Load shard `index`: from the cache if it holds a good copy, else from the network
    /// (twice at most when the hash fails).
    async fn load(&self, index: usize) -> Result<()> {
        let url = self.locator.url(&self.manifest.shards[index].file)?;
        if let Some(cache) = self.cache {
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
        let mut tries = 0;
        loop {
            tries += 1;
            self.progress.emit("download", Some(index));
            let response = fetch::get(&url, self.signal).await?;
            // A copy for the cache, stored only once the shard is verified.
            let copy = match self.cache {
                Some(_) => response.clone().ok(),
                None => None,
            };
            match self.stream(index, &url, &response).await {
                Ok(()) => {
                    if let (Some(cache), Some(copy)) = (self.cache, copy) {
                        fetch::store(cache, &url, &copy).await;
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
