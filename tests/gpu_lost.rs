//! A lost GPU device (simulated by destroying it, `wgpu::Device::destroy`, mid-generation
//! on the test adapter) is `Error::GpuLost` within a second, never a hang or a panic; and
//! `Engine::reload` opens a new device, uploads the weights again and re-runs the kept
//! history, so that greedy generation goes on with the same tokens as an undisturbed run.

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::open;
use pocketrt::Error;
use std::path::PathBuf;
use std::time::Instant;

const CONTEXT: usize = 128;
const NEW: usize = 8;
/// Tokens generated before the device is destroyed.
const BEFORE: usize = 3;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/llama")
}

fn engine() -> Engine {
    let src = &mut *open(&fixture()).unwrap();
    Engine::load(src, Backend::Gpu, WeightMode::Q4, CONTEXT).unwrap()
}

#[test]
fn a_destroyed_device_is_gpu_lost_and_reload_continues_the_same_tokens() {
    let prompt: Vec<u32> = (0..24).map(|i| (i * 37 + 5) % 512).collect();
    let undisturbed = engine().greedy(&prompt, NEW, |_| true).unwrap();

    let mut e = engine();
    let (&last, head) = prompt.split_last().unwrap();
    e.feed_all(head).unwrap();
    let mut next = e.step(last).unwrap();
    // The tokens the KV cache holds, in order (what a session keeps).
    let mut history = prompt.clone();
    let mut out = vec![];
    let mut lost = None;
    while out.len() < NEW {
        out.push(next);
        if out.len() == BEFORE {
            e.gpu_context().expect("a GPU engine").device.destroy();
            let t0 = Instant::now();
            let r = e.step(next);
            lost = Some((r, t0.elapsed()));
            break;
        }
        next = e.step(next).unwrap();
        history.push(out[out.len() - 1]);
    }
    let (r, took) = lost.expect("the device was destroyed");
    match r {
        Err(Error::GpuLost(why)) => println!("GpuLost after {took:?}: {why}"),
        other => panic!("a destroyed device gives GpuLost, not {other:?}"),
    }
    assert!(
        took.as_secs_f64() < 1.0,
        "GpuLost within a second, took {took:?}"
    );
    // Every later call says the same until the model is reloaded.
    assert!(matches!(e.step(next), Err(Error::GpuLost(_))));

    let src = &mut *open(&fixture()).unwrap();
    e.reload(src, &history).unwrap();
    assert_eq!(
        e.position(),
        history.len(),
        "the history is in the new cache"
    );
    let mut token = *out.last().unwrap();
    while out.len() < NEW {
        token = e.step(token).unwrap();
        out.push(token);
    }
    assert_eq!(
        out, undisturbed,
        "the reloaded engine goes on like an undisturbed run"
    );
}
