//! Models kept in Cache Storage. A load keeps, next to the weights, every small file it
//! read (the hub's listing of an id, the manifest, the tokenizer: the chat template is in
//! the manifest or the GGUF header) and a record of the model (`Record`: its files and
//! shards), so that a cached model starts with no network (`offline: true` forbids
//! requests; by default a failed request falls back to the cached copy) and so that
//! `Pocket.cache` can list, check and delete models. Before the weights download, the
//! bytes still missing are compared with `navigator.storage.estimate()` (a `QUOTA` error,
//! or with `overQuota: "uncached"` a load that stores nothing); a `cache.put` that fails
//! is reported (a `cache-error` progress event and `info.cacheErrors`), never swallowed.

use super::errors::to_js;
use super::fetch::{self, CACHE_NAME};
use super::load::Progress;
use super::options::OverQuota;
use crate::error::{Error, Result};
use js_sys::{Array, Promise, Reflect};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, Request, Response};

/// Cache keys of model records (never fetched).
const RECORD_PREFIX: &str = "https://pocketrt.invalid/model/";

/// What the cache holds of one model: the model's name as loaded (a URL or a hub id),
/// its small files' keys and its weight shards (or GGUF pieces) with their sizes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub url: String,
    pub files: Vec<String>,
    pub shards: Vec<(String, u64)>,
    /// Milliseconds since the epoch of the last load.
    pub last_used: f64,
}

impl Record {
    pub fn new(url: &str) -> Record {
        Record {
            url: url.to_string(),
            ..Default::default()
        }
    }

    fn key(url: &str) -> String {
        let name: String = js_sys::encode_uri_component(url).into();
        format!("{RECORD_PREFIX}{name}")
    }
}

/// The keys (URLs) the cache holds.
async fn keys(cache: &Cache) -> HashSet<String> {
    let Ok(list) = JsFuture::from(cache.keys()).await else {
        return HashSet::new();
    };
    Array::from(&list)
        .iter()
        .filter_map(|r| r.dyn_into::<Request>().ok().map(|r| r.url()))
        .collect()
}

/// `navigator.storage.estimate()`: (usage, quota) in bytes, where the browser has it.
pub async fn estimate() -> Option<(u64, u64)> {
    let storage = Reflect::get(&js_sys::global(), &"navigator".into())
        .and_then(|n| Reflect::get(&n, &"storage".into()))
        .ok()?;
    let f: js_sys::Function = Reflect::get(&storage, &"estimate".into())
        .ok()?
        .dyn_into()
        .ok()?;
    let promise: Promise = f.call0(&storage).ok()?.dyn_into().ok()?;
    let e = JsFuture::from(promise).await.ok()?;
    let get = |k: &str| Reflect::get(&e, &k.into()).ok()?.as_f64();
    Some((get("usage").unwrap_or(0.0) as u64, get("quota")? as u64))
}

/// Whether the browser says it has no network (`navigator.onLine === false`).
fn browser_offline() -> bool {
    Reflect::get(&js_sys::global(), &"navigator".into())
        .and_then(|n| Reflect::get(&n, &"onLine".into()))
        .ok()
        .and_then(|v| v.as_bool())
        == Some(false)
}

/// A text file's body for the cache.
fn text_response(text: &str) -> Option<Response> {
    Response::new_with_opt_str(Some(text)).ok()
}

impl Progress<'_> {
    /// The text of a small file (`url`): from the network, kept in the cache; from the
    /// cache when `offline` is set, when the browser says it is offline
    /// (`navigator.onLine`), or when the request fails and the cache has a copy.
    pub async fn text(&self, url: &str) -> Result<String> {
        let from_cache = || async {
            let response = fetch::cached(self.cache.as_ref()?, url).await?;
            let text = fetch::text(url, &response).await.ok()?;
            self.report.borrow_mut().files_from_cache += 1;
            Some(text)
        };
        if self.opts.no_requests() {
            return from_cache().await.ok_or_else(|| Error::NotCached {
                url: url.to_string(),
            });
        }
        if browser_offline() {
            if let Some(text) = from_cache().await {
                return Ok(text);
            }
        }
        let fetched = async {
            let response = fetch::get(url, self.opts.signal.as_ref()).await?;
            fetch::text(url, &response).await
        };
        match fetched.await {
            Ok(text) => {
                self.report.borrow_mut().files_fetched += 1;
                if let Some(r) = text_response(&text) {
                    self.keep(url, &r, None).await;
                }
                Ok(text)
            }
            Err(e @ Error::Aborted) => Err(e),
            Err(e) => from_cache().await.ok_or(e),
        }
    }

    /// Store `response` under `key` when this load caches (held back until the quota
    /// check passes, [`Progress::admit`]); a failure is reported (a `cache-error` progress
    /// event, `info.cacheErrors`) and the load goes on.
    pub async fn keep(&self, key: &str, response: &Response, shard: Option<usize>) {
        let Some(cache) = self.cache.as_ref().filter(|_| self.store.get()) else {
            return;
        };
        if !self.admitted.get() {
            let entry = (key.to_string(), Clone::clone(response), shard);
            self.pending.borrow_mut().push(entry);
            return;
        }
        if let Err(why) = fetch::store(cache, key, response).await {
            let message = format!("{key}: not cached: {why}");
            self.report.borrow_mut().cache_errors.push(message.clone());
            self.emit_with("cache-error", shard, Some(&message));
        }
    }

    /// Check that the shards of `record` the cache lacks fit the storage quota (see the
    /// module's comment), then keep the record. Every file the load reads is kept.
    pub async fn admit(&self, record: &mut Record) -> Result<()> {
        let Some(cache) = self.cache.as_ref() else {
            return Ok(());
        };
        let held = keys(cache).await;
        let needed: u64 = record
            .shards
            .iter()
            .filter(|(url, _)| !held.contains(url))
            .map(|(_, bytes)| bytes)
            .sum();
        if let Some((usage, quota)) = estimate().await.filter(|_| needed > 0) {
            let available = quota.saturating_sub(usage);
            if needed > available {
                match self.opts.over_quota {
                    OverQuota::Error => return Err(Error::Quota { needed, available }),
                    OverQuota::Uncached => {
                        self.store.set(false);
                        self.pending.borrow_mut().clear();
                        self.report.borrow_mut().uncached = Some(format!(
                            "the model needs {needed} more bytes of storage, the quota \
                             allows {available} more: loaded without caching"
                        ));
                        return Ok(());
                    }
                }
            }
        }
        self.admitted.set(true);
        let pending = std::mem::take(&mut *self.pending.borrow_mut());
        for (key, response, shard) in pending {
            self.keep(&key, &response, shard).await;
        }
        record.last_used = js_sys::Date::now();
        if let Some(r) = serde_json::to_string(record)
            .ok()
            .and_then(|j| text_response(&j))
        {
            self.keep(&Record::key(&record.url), &r, None).await;
        }
        Ok(())
    }
}

/// One model in the cache, as `Pocket.cache.list()` gives it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    url: String,
    /// Bytes of the shards present, and of all of them.
    bytes: u64,
    total_bytes: u64,
    shards: usize,
    shards_expected: usize,
    /// Every shard and small file present: the model loads with no network.
    complete: bool,
    last_used: f64,
}

/// Every model record in `cache`, and the keys the cache holds.
async fn records(cache: &Cache) -> (Vec<Record>, HashSet<String>) {
    let held = keys(cache).await;
    let mut out = Vec::new();
    for key in held.iter().filter(|k| k.starts_with(RECORD_PREFIX)) {
        let Some(response) = fetch::cached(cache, key).await else {
            continue;
        };
        let Ok(text) = fetch::text(key, &response).await else {
            continue;
        };
        if let Ok(r) = serde_json::from_str::<Record>(&text) {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.url.cmp(&b.url));
    (out, held)
}

fn listed(r: &Record, held: &HashSet<String>) -> Listed {
    let present: Vec<&(String, u64)> = r.shards.iter().filter(|(u, _)| held.contains(u)).collect();
    Listed {
        url: r.url.clone(),
        bytes: present.iter().map(|(_, b)| b).sum(),
        total_bytes: r.shards.iter().map(|(_, b)| b).sum(),
        shards: present.len(),
        shards_expected: r.shards.len(),
        complete: present.len() == r.shards.len() && r.files.iter().all(|f| held.contains(f)),
        last_used: r.last_used,
    }
}

/// The browser's Cache Storage.
fn storage() -> Result<web_sys::CacheStorage> {
    Reflect::get(&js_sys::global(), &"caches".into())
        .ok()
        .and_then(|c| c.dyn_into::<web_sys::CacheStorage>().ok())
        .ok_or_else(|| Error::InvalidArgument("Cache Storage is not available here".into()))
}

/// pocketrt's cache, if there is one (looking must not create it: `clear()` then
/// `list()` leaves no cache behind).
async fn open() -> Result<Option<Cache>> {
    let caches = storage()?;
    let has = JsFuture::from(caches.has(CACHE_NAME))
        .await
        .map_err(|e| super::errors::from_js(CACHE_NAME, e))?;
    match has.as_bool() {
        Some(true) => Ok(fetch::open_cache(CACHE_NAME).await),
        _ => Ok(None),
    }
}

fn to_value<T: Serialize>(v: &T) -> JsValue {
    serde_json::to_string(v)
        .ok()
        .and_then(|s| js_sys::JSON::parse(&s).ok())
        .unwrap_or(JsValue::UNDEFINED)
}

/// `Pocket.cache.list()`: every model the cache holds (complete or not).
#[wasm_bindgen(js_name = cacheList)]
pub async fn cache_list() -> Result<JsValue, JsValue> {
    let Some(cache) = open().await.map_err(to_js)? else {
        return Ok(Array::new().into());
    };
    let (all, held) = records(&cache).await;
    let list: Vec<Listed> = all.iter().map(|r| listed(r, &held)).collect();
    Ok(to_value(&list))
}

/// `Pocket.cache.has(url)`: whether the model loaded as `url` is wholly cached.
#[wasm_bindgen(js_name = cacheHas)]
pub async fn cache_has(url: String) -> Result<bool, JsValue> {
    let Some(cache) = open().await.map_err(to_js)? else {
        return Ok(false);
    };
    let (all, held) = records(&cache).await;
    Ok(all
        .iter()
        .any(|r| r.url == url && listed(r, &held).complete))
}

/// `Pocket.cache.delete(url)`: remove the model loaded as `url` (its record, and its
/// files and shards that no other record names); whether it was there.
#[wasm_bindgen(js_name = cacheDelete)]
pub async fn cache_delete(url: String) -> Result<bool, JsValue> {
    let Some(cache) = open().await.map_err(to_js)? else {
        return Ok(false);
    };
    let (all, _) = records(&cache).await;
    let Some(r) = all.iter().find(|r| r.url == url) else {
        return Ok(false);
    };
    // Files another record names stay (`/x/` and `/x/manifest.json` are one package).
    let others: HashSet<&String> = all
        .iter()
        .filter(|o| o.url != url)
        .flat_map(|o| o.files.iter().chain(o.shards.iter().map(|(u, _)| u)))
        .collect();
    let keys = r.files.iter().chain(r.shards.iter().map(|(u, _)| u));
    let keys = keys.filter(|k| !others.contains(k));
    for key in keys.chain(std::iter::once(&Record::key(&r.url))) {
        JsFuture::from(cache.delete_with_str(key))
            .await
            .map_err(|e| to_js(super::errors::from_js(key, e)))?;
    }
    Ok(true)
}

/// `Pocket.cache.clear()`: remove everything pocketrt cached (models and backend
/// decisions); whether there was a cache.
#[wasm_bindgen(js_name = cacheClear)]
pub async fn cache_clear() -> Result<bool, JsValue> {
    let caches = storage().map_err(to_js)?;
    let done = JsFuture::from(caches.delete(CACHE_NAME))
        .await
        .map_err(|e| to_js(super::errors::from_js(CACHE_NAME, e)))?;
    Ok(done.as_bool().unwrap_or(false))
}
