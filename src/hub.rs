//! Models named by hub id (`owner/name`, e.g. `taobao-mnn/MNN-Pocket-0.3B-GGUF`): the
//! hub's file-listing API is asked once, the best file chosen (a pocket package, else the
//! GGUF whose quantization we keep losslessly, else an HF folder), and the files are
//! downloaded once into a cache folder — resumably (`.part` files and HTTP ranges), with
//! sha256 checks where the hub or the manifest gives a hash. Later runs use the cache
//! without any network.
//!
//! Endpoint: `POCKETRT_HUB_ENDPOINT`, else `HF_ENDPOINT`, else https://huggingface.co
//! (mirrors expose the same API). Cache: `POCKETRT_CACHE`, else `$XDG_CACHE_HOME/pocketrt`,
//! else `~/.cache/pocketrt`.

mod choose;
mod download;

use crate::error::{Error, Result};
use crate::format::package::{Manifest, MANIFEST_FILE};
use choose::{choose, Choice, Sibling};
use std::path::{Path, PathBuf};

pub use download::Progress;

/// Marker written when every file of a model is in the cache: the model's path inside
/// the cache folder ("." for a folder model).
const COMPLETE: &str = ".pocketrt-complete";

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

/// A local path as it is; an `owner/name` hub id that is not a local path through the
/// hub (cached after the first download).
pub fn resolve_model(arg: &str, progress: &mut dyn FnMut(Progress)) -> Result<PathBuf> {
    let path = Path::new(arg);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    if !is_hub_id(arg) {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or folder"),
        ));
    }
    Hub::from_env()?.resolve(arg, progress)
}

/// A model hub endpoint and the local cache it downloads into.
pub struct Hub {
    pub endpoint: String,
    pub cache: PathBuf,
}

impl Hub {
    pub fn from_env() -> Result<Hub> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let endpoint = var("POCKETRT_HUB_ENDPOINT")
            .or_else(|| var("HF_ENDPOINT"))
            .unwrap_or_else(|| "https://huggingface.co".into());
        let cache = match (var("POCKETRT_CACHE"), var("XDG_CACHE_HOME"), var("HOME")) {
            (Some(c), _, _) => PathBuf::from(c),
            (None, Some(x), _) => Path::new(&x).join("pocketrt"),
            (None, None, Some(h)) => Path::new(&h).join(".cache/pocketrt"),
            _ => {
                return Err(Error::InvalidArgument(
                    "no cache folder for hub downloads: set POCKETRT_CACHE".into(),
                ))
            }
        };
        Ok(Hub::new(&endpoint, cache))
    }

    pub fn new(endpoint: &str, cache: PathBuf) -> Hub {
        Hub {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            cache,
        }
    }

    /// The cache folder of hub model `id`.
    pub fn model_dir(&self, id: &str) -> PathBuf {
        self.cache.join("hub").join(id.replace('/', "--"))
    }

    /// The local path of model `id`: from the cache when complete, else downloaded.
    pub fn resolve(&self, id: &str, progress: &mut dyn FnMut(Progress)) -> Result<PathBuf> {
        if !is_hub_id(id) {
            return Err(Error::InvalidArgument(format!(
                "{id:?} is not a hub id (owner/name)"
            )));
        }
        let dir = self.model_dir(id);
        if let Ok(rel) = std::fs::read_to_string(dir.join(COMPLETE)) {
            let path = dir.join(rel.trim());
            if path.exists() {
                return Ok(path);
            }
        }
        let listing = download::get_text(&self.api_url(id), id, &self.endpoint)?;
        let siblings = Sibling::parse_listing(&listing, id)?;
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let rel = match choose(&siblings).ok_or_else(|| {
            let names: Vec<&str> = siblings.iter().map(|s| s.name.as_str()).collect();
            Error::Hub(format!(
                "{id} has no model file pocketrt can run (a pocket package, a GGUF, or \
                 config.json + safetensors); its files: {names:?}"
            ))
        })? {
            Choice::Package { tokenizer } => {
                let manifest = self.fetch(id, &dir, MANIFEST_FILE, None, progress)?;
                let text =
                    std::fs::read_to_string(&manifest).map_err(|e| Error::io(&manifest, e))?;
                let m = Manifest::from_json(&text)?;
                for s in &m.shards {
                    self.fetch(id, &dir, &s.file, Some(&s.sha256), progress)?;
                }
                if let Some(t) = tokenizer {
                    self.fetch(id, &dir, &t.name, t.sha256.as_deref(), progress)?;
                }
                ".".to_string()
            }
            Choice::File(f) => {
                self.fetch(id, &dir, &f.name, f.sha256.as_deref(), progress)?;
                f.name.clone()
            }
            Choice::Folder(files) => {
                for f in &files {
                    self.fetch(id, &dir, &f.name, f.sha256.as_deref(), progress)?;
                }
                ".".to_string()
            }
        };
        let marker = dir.join(COMPLETE);
        std::fs::write(&marker, &rel).map_err(|e| Error::io(&marker, e))?;
        Ok(dir.join(rel))
    }

    fn api_url(&self, id: &str) -> String {
        format!("{}/api/models/{id}?blobs=true", self.endpoint)
    }

    fn fetch(
        &self,
        id: &str,
        dir: &Path,
        name: &str,
        sha256: Option<&str>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PathBuf> {
        let url = format!("{}/{id}/resolve/main/{name}", self.endpoint);
        let dest = dir.join(name);
        download::file(&url, &dest, sha256, &self.endpoint, progress)?;
        Ok(dest)
    }
}

#[cfg(test)]
mod tests;
