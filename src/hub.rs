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

//! The listing parser, the choice of file and the URLs ([`choose`]) are shared with the
//! browser's loader (`web::hub`); the downloads and the cache are native only.

pub mod choose;
#[cfg(not(target_arch = "wasm32"))]
mod download;

#[cfg(not(target_arch = "wasm32"))]
use crate::error::{Error, Result};
#[cfg(not(target_arch = "wasm32"))]
use crate::format::package::{Manifest, MANIFEST_FILE};
#[cfg(not(target_arch = "wasm32"))]
use choose::{choose_or_error, file_url, listing_url, Choice, Sibling, DEFAULT_ENDPOINT};
#[cfg(not(target_arch = "wasm32"))]
use std::path::{Path, PathBuf};

pub use choose::is_hub_id;
#[cfg(not(target_arch = "wasm32"))]
pub use download::{sha256_file, Progress};

/// Marker written when every file of a model is in the cache: the model's path inside
/// the cache folder ("." for a folder model).
#[cfg(not(target_arch = "wasm32"))]
const COMPLETE: &str = ".pocketrt-complete";

/// A local path as it is; an `owner/name` hub id that is not a local path through the
/// hub (cached after the first download).
#[cfg(not(target_arch = "wasm32"))]
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
#[cfg(not(target_arch = "wasm32"))]
pub struct Hub {
    pub endpoint: String,
    pub cache: PathBuf,
}

#[cfg(not(target_arch = "wasm32"))]
impl Hub {
    pub fn from_env() -> Result<Hub> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let endpoint = var("POCKETRT_HUB_ENDPOINT")
            .or_else(|| var("HF_ENDPOINT"))
            .unwrap_or_else(|| DEFAULT_ENDPOINT.into());
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
        let listing = download::get_text(&listing_url(&self.endpoint, id), id, &self.endpoint)?;
        let siblings = Sibling::parse_listing(&listing, id)?;
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let rel = match choose_or_error(&siblings, id)? {
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

    fn fetch(
        &self,
        id: &str,
        dir: &Path,
        name: &str,
        sha256: Option<&str>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PathBuf> {
        let url = file_url(&self.endpoint, id, name);
        let dest = dir.join(name);
        download::file(&url, &dest, sha256, &self.endpoint, progress)?;
        Ok(dest)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
