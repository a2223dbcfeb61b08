//! `Backend::Auto` chooses by adapter and says why: the GPU on a real adapter, the fast
//! CPU backend without one, and on a software adapter (lavapipe here) the faster of the
//! two, predicted by a probe of the model's layer shapes whose figures appear in the
//! description and which a second load remembers instead of probing again. Whichever case
//! this machine is in is checked (none is skipped), and the engine must then decode the
//! same tokens as the chosen backend loaded explicitly. f32 weights under Auto run on the
//! reference.

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::open;
use pocketrt::gpu::{LimitsNeeded, ProfiledContext};
use pocketrt::Error;
use std::path::PathBuf;

const CONTEXT: usize = 48;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/qwen3")
}

#[test]
fn auto_picks_by_adapter_reports_why_and_decodes_the_oracles_tokens() {
    let adapter = match ProfiledContext::open_blocking(LimitsNeeded::default()) {
        Ok(ctx) => Some((ctx.adapter.clone(), ctx.profile)),
        Err(Error::NoGpuAdapter { .. }) => None,
        Err(e) => panic!("probing the adapter: {e}"),
    };
    // Decisions are kept here (a fresh folder: the first load probes).
    let store = std::env::temp_dir().join(format!("pocketrt-auto-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&store);
    std::env::set_var("POCKETRT_CACHE_DIR", &store);
    let t = std::time::Instant::now();
    let mut engine = Engine::load(
        &mut *open(&fixture()).unwrap(),
        Backend::Auto,
        WeightMode::Q4,
        CONTEXT,
    )
    .unwrap();
    let d = engine.description().to_string();
    println!(
        "adapter {adapter:?}\nauto: {d} (loaded in {:.2?})",
        t.elapsed()
    );
    match &adapter {
        None => assert!(d.starts_with("no GPU adapter: cpu ("), "{d}"),
        Some((a, profile)) if profile.software => {
            assert!(
                d.contains("software GPU adapter") && d.contains(&a.name),
                "{d}"
            );
            assert!(d.contains("CPU") && d.contains("tok/s"), "{d}");
            assert!(d.starts_with("gpu ") || d.starts_with("cpu ("), "{d}");
            assert!(d.contains("chosen by a probe"), "{d}");
            // The second load takes the kept decision: same backend, no probe.
            let again = Engine::load(
                &mut *open(&fixture()).unwrap(),
                Backend::Auto,
                WeightMode::Q4,
                CONTEXT,
            )
            .unwrap();
            let d2 = again.description();
            assert!(d2.contains("remembered from an earlier probe"), "{d2}");
            // Same backend and adapter; the CPU kernel's timings (and so
            // its pick) may differ from one load to the next.
            assert_eq!(d2.split(" (").next(), d.split(" (").next(), "{d2}");
            assert!(store.join("backend-choice.json").is_file());
        }
        Some((_, profile)) => {
            assert!(d.starts_with("gpu "), "{d}");
            assert!(d.contains(&format!("profile {}", profile.name)), "{d}");
        }
    }

    // It runs what it says: the same tokens as that backend loaded explicitly.
    let chosen = if d.starts_with("gpu ") {
        Backend::Gpu
    } else {
        Backend::Cpu
    };
    let mut explicit = Engine::load(
        &mut *open(&fixture()).unwrap(),
        chosen,
        WeightMode::Q4,
        CONTEXT,
    )
    .unwrap();
    let want = explicit.greedy(&[3, 141, 59], 16, |_| true).unwrap();
    let got = engine.greedy(&[3, 141, 59], 16, |_| true).unwrap();
    assert_eq!(got, want, "{d}");
}

#[test]
fn auto_with_f32_weights_runs_the_reference() {
    let e = Engine::load(
        &mut *open(&fixture()).unwrap(),
        Backend::Auto,
        WeightMode::F32,
        8,
    )
    .unwrap();
    assert_eq!(e.description(), "reference cpu (f32 weights)");
}
