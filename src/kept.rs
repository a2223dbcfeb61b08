//! Decisions kept across loads natively, each of a kind (`backend-choice`: the backend
//! probe's, `engine/probe.rs`; `gpu-tune`: the tuner's design, `gpu/tune/native.rs`)
//! under a key naming what it depends on, as a map from keys to decisions in the JSON file
//! `KIND.json` of the cache folder. Best effort: a missing, unreadable or read-only store
//! only means the next load decides again. In the browser the same kinds and keys are
//! kept in Cache Storage (`web/kept.rs`).

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The cache folder: `$POCKETRT_CACHE_DIR`, else `$XDG_CACHE_HOME/pocketrt`, else
/// `~/.cache/pocketrt`; `None` without any.
pub fn cache_folder() -> Option<PathBuf> {
    let var = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("POCKETRT_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("pocketrt")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/pocketrt")))
}

/// The file of the cache folder decisions of `kind` are kept in.
fn file(kind: &str) -> String {
    format!("{kind}.json")
}

fn read_all<T: DeserializeOwned>(kind: &str) -> BTreeMap<String, T> {
    cache_folder()
        .and_then(|dir| std::fs::read_to_string(dir.join(file(kind))).ok())
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

/// The decision of `kind` kept under `key`, if any (an unreadable store is none).
pub fn remembered<T: DeserializeOwned>(kind: &str, key: &str) -> Option<T> {
    read_all(kind).remove(key)
}

/// Keep `value` as the decision of `kind` under `key`. Best effort: not kept, the next
/// load decides again.
pub fn remember<T: Serialize + DeserializeOwned>(kind: &str, key: &str, value: &T) {
    let Some(dir) = cache_folder() else { return };
    let mut all: BTreeMap<String, serde_json::Value> = read_all(kind);
    let Ok(value) = serde_json::to_value(value) else {
        return;
    };
    all.insert(key.to_string(), value);
    let Ok(text) = serde_json::to_string_pretty(&all) else {
        return;
    };
    let _ = std::fs::create_dir_all(&dir);
    // Written aside and renamed, so a concurrent reader never sees half a file.
    let path = dir.join(file(kind));
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}
