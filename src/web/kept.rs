//! Decisions kept across loads in the browser, each of a kind (`backend-choice`: the
//! backend probe's, `backend.rs`; `gpu-tune`: the tuner's design, `tune.rs`) under a key
//! naming what it depends on, as the JSON of a Cache Storage entry of the load's cache
//! (`https://pocketrt.invalid/KIND/KEY`, never fetched). Best effort: a missing or
//! unreadable entry, or no cache, only means the next load decides again. Natively the
//! same kinds and keys are kept in the cache folder (`crate::kept`).

use super::fetch::{cached, open_cache, store};
use wasm_bindgen_futures::JsFuture;
use web_sys::Response;

/// The Cache Storage URL a decision of `kind` is kept under for `key`.
fn url(kind: &str, key: &str) -> String {
    let key: String = js_sys::encode_uri_component(key).into();
    format!("https://pocketrt.invalid/{kind}/{key}")
}

/// The decision of `kind` kept under `key` in the cache called `cache`, if any (no cache,
/// or an unreadable entry, is none).
pub async fn remembered<T: serde::de::DeserializeOwned>(
    cache: Option<&str>,
    kind: &str,
    key: &str,
) -> Option<T> {
    let cache = open_cache(cache?).await?;
    let response = cached(&cache, &url(kind, key)).await?;
    let text = JsFuture::from(response.text().ok()?).await.ok()?;
    serde_json::from_str(&text.as_string()?).ok()
}

/// Keep `value` as the decision of `kind` under `key` in the cache called `cache`. Best
/// effort: not kept, the next load decides again (nothing of the model is lost).
pub async fn remember<T: serde::Serialize>(cache: Option<&str>, kind: &str, key: &str, value: &T) {
    let Some(cache) = cache else { return };
    let Some(cache) = open_cache(cache).await else {
        return;
    };
    let response = serde_json::to_string(value)
        .ok()
        .and_then(|json| Response::new_with_opt_str(Some(&json)).ok());
    if let Some(response) = response {
        let _ = store(&cache, &url(kind, key), &response).await;
    }
}
