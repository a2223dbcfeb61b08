//! Which reader opens a model path: a pocket package folder (`manifest.json`), an HF
//! folder (`config.json` + safetensors) or a GGUF file (by its magic). The readers
//! implement [`ModelSource`] (`source.rs`); this is the one place that knows all three.

use super::gguf_source::GgufSource;
use super::package::MANIFEST_FILE;
use super::package_source::PackageSource;
use super::safetensors::HfSource;
use super::source::ModelSource;
use crate::error::{Error, Result};

/// Open a model by path: a GGUF file, an HF folder (config.json + safetensors) or a pocket
/// package folder (manifest.json).
pub fn open(path: &std::path::Path) -> Result<Box<dyn ModelSource>> {
    if path.is_dir() {
        if path.join(MANIFEST_FILE).exists() {
            return Ok(Box::new(PackageSource::open(path)?));
        }
        if path.join("config.json").exists() {
            return Ok(Box::new(HfSource::open(path)?));
        }
        return Err(Error::InvalidArgument(format!(
            "{}: a model folder needs config.json (HF) or manifest.json (pocket package)",
            path.display()
        )));
    }
    let mut magic = [0u8; 4];
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let n = std::io::Read::read(&mut f, &mut magic).map_err(|e| Error::io(path, e))?;
    if &magic[..n] == b"GGUF" {
        return Ok(Box::new(GgufSource::open(path)?));
    }
    Err(Error::BadMagic {
        what: path.display().to_string(),
        expected: "GGUF",
        found: magic[..n].to_vec(),
    })
}
