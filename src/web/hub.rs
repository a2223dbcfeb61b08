//! Models named by hub id in the browser: the hub's listing API is asked (its answer kept
//! in the cache with the model, so that a cached model starts offline), the best file
//! chosen exactly as natively ([`crate::hub::choose`]), and the model's URL returned — a
//! pocket package's manifest or a GGUF file, both then loaded (and cached) as any URL.

use super::cache::Record;
use super::load::Progress;
use crate::error::{Error, Result};
use crate::format::package::MANIFEST_FILE;
use crate::hub::choose::{choose_or_error, file_url, listing_url, Choice, Sibling};

/// The URL of the model hub id `id` names on `endpoint`; the listing's URL goes into
/// `record`.
pub async fn resolve(
    id: &str,
    endpoint: &str,
    progress: &Progress<'_>,
    record: &mut Record,
) -> Result<String> {
    let url = listing_url(endpoint, id);
    let listing = progress.text(&url).await.map_err(|e| match e {
        Error::Fetch { url, detail } => Error::Hub(format!(
            "{url}: {detail} (is {id} a model on {endpoint}? a mirror can be set with the \
             hubEndpoint option)"
        )),
        e => e,
    })?;
    record.files.push(url);
    let siblings = Sibling::parse_listing(&listing, id)?;
    match choose_or_error(&siblings, id)? {
        Choice::Package { .. } => Ok(file_url(endpoint, id, MANIFEST_FILE)),
        Choice::File(f) => Ok(file_url(endpoint, id, &f.name)),
        Choice::Folder(_) => Err(Error::Unsupported {
            what: id.to_string(),
            kind: "hub model",
            name: "an HF safetensors folder (in the browser)".into(),
            supported: "pocket packages and GGUF files",
        }),
    }
}
