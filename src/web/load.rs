//! What a browser load tells: its progress events and shared state (`Progress`: the
//! options it was given, the report, the cache it reads and keeps files in), the report
//! JavaScript reads (`LoadReport`, `info()`), and its one end (`Progress::finish`,
//! `Loaded`), shared by the package load (`loader.rs`) and the GGUF load (`gguf.rs`). What
//! it is asked is `options.rs`; the helpers of a load (`hub.rs`, `cache.rs`, `backend.rs`,
//! `tune.rs`) build on these.

use super::fetch;
use super::model::WebModel;
use super::options::LoadOptions;
use crate::embed::Pooling;
use crate::gpu::ProfiledContext;
use crate::tokenizer::{ChatTemplate, Tokenizer};
use std::cell::{Cell, RefCell};
use web_sys::Cache;

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
    pub pooling: Option<Pooling>,
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
    pub(super) fn set_device(&mut self, ctx: &ProfiledContext) {
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
            cache: cache_for(opts).await,
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

    /// The end of every load (a package's, a GGUF's): "ready" told, the report completed
    /// from the model built (`built`: it and why its backend, `Target::finish`), and the
    /// model with what it came with.
    pub fn finish(
        self,
        built: (WebModel, String),
        tokenizer: Tokenizer,
        template: Option<ChatTemplate>,
        model_id: String,
        pooling: Option<Pooling>,
    ) -> Loaded {
        self.emit("ready", None);
        let (model, reason) = built;
        let mut report = self.report.into_inner();
        report.context = model.context();
        report.backend = model.backend().into();
        report.backend_reason = reason;
        report.set_source();
        Loaded {
            model,
            tokenizer,
            template,
            report,
            model_id,
            pooling,
        }
    }
}

/// The cache a load uses: none for local files or with `cache: false`.
async fn cache_for(opts: &LoadOptions) -> Option<Cache> {
    match (&opts.cache_name, &opts.files) {
        (Some(name), None) => fetch::open_cache(name).await,
        _ => None,
    }
}
