//! The fuzz targets' committed seeds (`fuzz/corpus/`), replayed through the targets' own
//! code (`fuzz/src/`, the bodies libFuzzer runs) in a debug build: every seed parses to a
//! value or a typed error, and none panics. The default tier's fuzz smoke test; fuzzing
//! for real (libFuzzer, coverage-guided) is `scripts/fuzz`, in the long tier.

#[allow(dead_code)]
#[path = "../fuzz/src/lib.rs"]
mod fuzz;

use std::path::Path;

#[test]
fn every_fuzz_target_survives_its_committed_seeds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    // Every libFuzzer target has its body here, and every body a libFuzzer target.
    let mut bins: Vec<String> = std::fs::read_dir(root.join("fuzz_targets"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    bins.sort();
    let names: Vec<&str> = fuzz::TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(bins, names, "fuzz/fuzz_targets/ and fuzz::TARGETS differ");
    for (name, run) in fuzz::TARGETS {
        let dir = root.join("corpus").join(name);
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "{name}: no seeds in {}", dir.display());
        for seed in &seeds {
            let data = std::fs::read(seed).unwrap();
            let replay = std::panic::catch_unwind(|| run(&data));
            assert!(replay.is_ok(), "{name}: {} panicked", seed.display());
        }
        println!("{name}: {} seeds", seeds.len());
    }
}
