//! Which files of a hub repository to download, and where they are: pure logic shared by
//! the native client (`hub`) and the browser's loader (`web::hub`).

use crate::error::{Error, Result};
use crate::format::package::{MANIFEST_FILE, TOKENIZER_FILE};
use serde_json::Value;

/// The hub asked when none is configured.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Is `s` shaped like a hub id (`owner/name`, plain characters, no path syntax)?
pub fn is_hub_id(s: &str) -> bool {
    let ok = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    matches!(s.split_once('/'), Some((o, n)) if ok(o) && ok(n))
}

/// The listing API's URL for model `id` (files with sizes and LFS hashes).
pub fn listing_url(endpoint: &str, id: &str) -> String {
    format!(
        "{}/api/models/{id}?blobs=true",
        endpoint.trim_end_matches('/')
    )
}

/// The download URL of file `name` of model `id` (main branch).
pub fn file_url(endpoint: &str, id: &str, name: &str) -> String {
    format!(
        "{}/{id}/resolve/main/{name}",
        endpoint.trim_end_matches('/')
    )
}

/// A file of a hub repository, as the listing API describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sibling {
    pub name: String,
    pub size: Option<u64>,
    /// From the listing's LFS entry, when the hub gives one.
    pub sha256: Option<String>,
}

impl Sibling {
    /// Parse `GET /api/models/{id}?blobs=true`: `{"siblings": [{"rfilename", "size",
    /// "lfs": {"sha256"}}]}`. Files outside the repository root are ignored.
    pub fn parse_listing(text: &str, id: &str) -> Result<Vec<Sibling>> {
        let bad = |what: &str| Error::Hub(format!("the hub's listing of {id} {what}"));
        let v: Value = serde_json::from_str(text).map_err(|e| bad(&format!("is not JSON: {e}")))?;
        let list = v
            .get("siblings")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("has no \"siblings\" list"))?;
        Ok(list
            .iter()
            .filter_map(|s| {
                let name = s.get("rfilename")?.as_str()?;
                let plain =
                    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', ':']);
                plain.then(|| Sibling {
                    name: name.to_string(),
                    size: s.get("size").and_then(Value::as_u64),
                    sha256: s
                        .get("lfs")
                        .and_then(|l| l.get("sha256"))
                        .and_then(Value::as_str)
                        .filter(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
                        .map(str::to_ascii_lowercase),
                })
            })
            .collect())
    }
}

/// What to download.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// A pocket package: the manifest, the shards it lists, and its tokenizer.
    Package { tokenizer: Option<Sibling> },
    /// One GGUF file.
    File(Sibling),
    /// An HF folder: config, tokenizer files and safetensors.
    Folder(Vec<Sibling>),
}

/// GGUF quantizations, best first: Q4_1 pairs convert losslessly to Q4 g64 (how
/// MNN-Pocket is published); the rest are requantized, the smaller the closer.
const GGUF_PREFERENCE: [&str; 15] = [
    "q4_1", "q4_0", "q4_k_m", "q4_k_s", "q4_k", "iq4_nl", "q5_0", "q5_1", "q5_k_m", "q5_k_s",
    "q6_k", "q8_0", "f16", "bf16", "f32",
];

fn gguf_rank(name: &str) -> usize {
    let lower = name.to_ascii_lowercase();
    GGUF_PREFERENCE
        .iter()
        .position(|q| lower.contains(q))
        .unwrap_or(GGUF_PREFERENCE.len())
}

/// [`choose`], or an error naming the repository's files when none is a model.
pub fn choose_or_error(files: &[Sibling], id: &str) -> Result<Choice> {
    choose(files).ok_or_else(|| {
        let names: Vec<&str> = files.iter().map(|s| s.name.as_str()).collect();
        Error::Hub(format!(
            "{id} has no model file pocketrt can run (a pocket package, a GGUF, or \
             config.json + safetensors); its files: {names:?}"
        ))
    })
}

/// The best model in `files`, if any.
pub fn choose(files: &[Sibling]) -> Option<Choice> {
    let find = |name: &str| files.iter().find(|f| f.name == name).cloned();
    if find(MANIFEST_FILE).is_some() {
        return Some(Choice::Package {
            tokenizer: find(TOKENIZER_FILE),
        });
    }
    let best_gguf = files
        .iter()
        .filter(|f| {
            let lower = f.name.to_ascii_lowercase();
            lower.ends_with(".gguf") && !lower.contains("mmproj")
        })
        .min_by_key(|f| {
            (
                gguf_rank(&f.name),
                f.size.unwrap_or(u64::MAX),
                f.name.clone(),
            )
        });
    if let Some(f) = best_gguf {
        return Some(Choice::File(f.clone()));
    }
    let has_weights = files.iter().any(|f| f.name.ends_with(".safetensors"));
    if find("config.json").is_some() && has_weights {
        let wanted = |n: &str| {
            n.ends_with(".safetensors")
                || n == "model.safetensors.index.json"
                || ["config.json", TOKENIZER_FILE, "tokenizer_config.json"].contains(&n)
        };
        return Some(Choice::Folder(
            files.iter().filter(|f| wanted(&f.name)).cloned().collect(),
        ));
    }
    None
}
