//! Where a pocket package's files are: under a URL prefix (the folder of its
//! manifest.json), or in a map of local files (file name → blob URL).

use crate::error::{Error, Result};
use crate::format::package::MANIFEST_FILE;

/// Where the package's files are: a URL prefix, or a map of local files.
pub(super) struct Locator {
    base: String,
    manifest: String,
    files: Option<wasm_bindgen::JsValue>,
}

impl Locator {
    /// The locator of a model `url`: a folder URL, or the URL of its manifest file.
    pub(super) fn new(url: &str, files: Option<wasm_bindgen::JsValue>) -> Result<Locator> {
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
    pub(super) fn manifest(&self) -> Result<String> {
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
