//! Decisions kept across loads natively, each kind in one JSON file of the cache folder
//! (`backend-choice.json`: `Backend::Auto`'s probe; `gpu-tune.json`: the tuner's design),
//! as a map from a key naming what the decision depends on to the decision. Best effort:
//! a missing, unreadable or read-only store only means the next load decides again. The
//! browser keeps them in Cache Storage (`web/cache.rs`).

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

fn read_all<T: DeserializeOwned>(file: &str) -> BTreeMap<String, T> {
    cache_folder()
        .and_then(|dir| std::fs::read_to_string(dir.join(file)).ok())
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

/// The decision kept in `file` under `key`, if any (an unreadable store is none).
pub fn remembered<T: DeserializeOwned>(file: &str, key: &str) -> Option<T> {
    read_all(file).remove(key)
}

/// Keep `value` in `file` under `key`.
pub fn remember<T: Serialize + DeserializeOwned>(file: &str, key: &str, value: &T) {
    let Some(dir) = cache_folder() else { return };
    let mut all: BTreeMap<String, serde_json::Value> = read_all(file);
    let Ok(value) = serde_json::to_value(value) else {
        return;
    };
    all.insert(key.to_string(), value);
    let Ok(text) = serde_json::to_string_pretty(&all) else {
        return;
    };
    let _ = std::fs::create_dir_all(&dir);
    // Written aside and renamed, so a concurrent reader never sees half a file.
    let path = dir.join(file);
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}
