//! `pocketrt synth`: write a model of a preset's exact shapes with random weights (the
//! standard benchmark model: `--preset pocket-0.3b`), as a pocket package or a Q4_1 GGUF.

use pocketrt::synth::{write_gguf, write_package, SynthSource};
use pocketrt::Result;
use std::path::Path;

pub fn run(preset: &str, out: &Path, gguf: bool, seed: u64) -> Result<()> {
    let mut src = SynthSource::preset(preset, seed)?;
    if gguf {
        write_gguf(&src, out)?;
        let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
        println!(
            "wrote {} (Q4_1 GGUF, {:.1} MB, preset {preset}, seed {seed})",
            out.display(),
            bytes as f64 / 1e6
        );
    } else {
        let report = write_package(&mut src, out)?;
        println!(
            "wrote {} (pocket package, {} tensors, {} shards, {:.1} MB, preset {preset}, seed {seed}; no tokenizer)",
            out.display(),
            report.manifest.tensors.len(),
            report.manifest.shards.len(),
            report.package_bytes as f64 / 1e6
        );
    }
    Ok(())
}
