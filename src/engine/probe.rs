//! `Backend::Auto` on a software GPU adapter (lavapipe, SwiftShader, WARP), decided before
//! the model's weights are read: such an adapter runs the GPU kernels on the very CPU
//! cores the CPU backend would use, usually slower, so both are timed — but on a *probe*,
//! the model's own layer shapes with synthetic weights and a small vocabulary, not on the
//! model (which would then be loaded twice).
//!
//! A step costs a fixed part (submission and readback, embedding, norms) plus one part
//! per layer, and the LM head costs about as much as its share of the weights. Probes of
//! one and of [`LAYERS`] layers give both parts, and the prediction for the whole model
//! is `fixed + per_layer · (layers + head_weights / layer_weights)` on each backend. The
//! CPU is probed first; where the GPU's one-layer step alone is already slower than the
//! CPU's predicted whole model, the GPU's larger probe is skipped ([`Decision::settled`]):
//! on a software adapter each GPU probe costs pipeline builds and slow steps.
//!
//! The decision is kept per adapter and model shape ([`Decision::key`]): natively in the
//! cache folder ([`remembered`] / [`remember`]), in the browser in Cache Storage
//! (`web/backend.rs`), so a later load of the same model skips the probe.

use crate::config::ModelConfig;
use crate::cpu::fast::{FastModel, Precision};
use crate::error::Result;
use crate::synth::SynthSource;
use serde::{Deserialize, Serialize};
use web_time::{Duration, Instant};

/// Layers of the larger probe (the smaller has one).
pub(crate) const LAYERS: usize = 3;
/// Vocabulary of the probes: small, so the head's cost is predicted rather than timed.
const PROBE_VOCAB: usize = 256;
/// KV positions a probe needs (its timed steps).
pub(crate) const PROBE_CONTEXT: usize = 8;

/// Timed steps after the warm-up one (which compiles pipelines and faults pages in).
const STEPS: usize = 2;
/// Stop timing after this long even if fewer steps ran (a very slow adapter).
const MAX_TIME: Duration = Duration::from_millis(400);

/// The timing of one probe: one warm-up step, then up to `STEPS` timed steps or
/// `MAX_TIME`, whichever ends first. Drive it as `while t.more() { step; t.stepped() }`
/// (sync or async steps alike).
#[derive(Debug, Default)]
pub(crate) struct StepTimer {
    /// Set when the warm-up step ended.
    start: Option<Instant>,
    timed: usize,
}

impl StepTimer {
    /// Whether another step should run.
    pub(crate) fn more(&self) -> bool {
        match self.start {
            None => true,
            Some(t) => self.timed < STEPS && (self.timed == 0 || t.elapsed() < MAX_TIME),
        }
    }

    /// Record that a step ended.
    pub(crate) fn stepped(&mut self) {
        match self.start {
            None => self.start = Some(Instant::now()),
            Some(_) => self.timed += 1,
        }
    }

    /// Timed steps per second.
    pub(crate) fn rate(&self) -> f64 {
        let secs = self.start.map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.timed as f64 / secs.max(1e-9)
    }
}

/// The outcome of a probe: predicted full-model decode rates and the choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub gpu: bool,
    pub cpu_tok_s: f64,
    /// The GPU's predicted rate, or (with `gpu_bound`) an upper bound of it.
    pub gpu_tok_s: f64,
    /// Whether `gpu_tok_s` is only a bound: the rate of the GPU's one-layer probe, which
    /// settled the choice ([`Decision::settled`]).
    #[serde(default)]
    pub gpu_bound: bool,
}

fn rate(step_seconds: f64) -> f64 {
    1.0 / step_seconds.max(1e-9)
}

impl Decision {
    /// From predicted seconds per step on each backend.
    pub(crate) fn new(cpu_step: f64, gpu_step: f64) -> Decision {
        Decision {
            gpu: gpu_step < cpu_step,
            cpu_tok_s: rate(cpu_step),
            gpu_tok_s: rate(gpu_step),
            gpu_bound: false,
        }
    }

    /// The CPU, when the GPU's one-layer probe step (`gpu_one` seconds) is no faster than
    /// the CPU's predicted whole-model step: the GPU's prediction is never below its
    /// one-layer step ([`predict`] only adds layers and the head), so its larger probe
    /// could not change the choice. `None` when it could.
    pub(crate) fn settled(cpu_step: f64, gpu_one: f64) -> Option<Decision> {
        (gpu_one >= cpu_step).then(|| Decision {
            gpu: false,
            cpu_tok_s: rate(cpu_step),
            gpu_tok_s: rate(gpu_one),
            gpu_bound: true,
        })
    }

    /// What was decided and why, for `info` / `-v`.
    pub fn reason(&self, adapter: &str, remembered: bool) -> String {
        let how = if remembered {
            "remembered from an earlier probe"
        } else {
            "chosen by a probe of the model's layer shapes"
        };
        let gpu = match self.gpu_bound {
            true => format!("at most {:.1} tok/s (its one-layer probe)", self.gpu_tok_s),
            false => format!("{:.1} tok/s (predicted)", self.gpu_tok_s),
        };
        format!(
            "{how}: CPU {:.1} tok/s vs software GPU adapter {adapter} {gpu}",
            self.cpu_tok_s
        )
    }

    /// The key a decision is kept under: the adapter and every shape a step's cost
    /// depends on.
    pub fn key(adapter: &str, c: &ModelConfig) -> String {
        format!(
            "{}|{adapter}|{:?}|h{}|l{}|q{}|kv{}|d{}|f{}|v{}|t{}",
            env!("CARGO_PKG_VERSION"),
            c.arch,
            c.hidden_size,
            c.n_layers,
            c.n_heads,
            c.n_kv_heads,
            c.head_dim,
            c.ffn_size,
            c.vocab_size,
            c.tie_embeddings
        )
    }
}

/// A synthetic model of `config`'s layer shapes with `layers` layers and a small vocabulary.
pub(crate) fn probe_source(config: &ModelConfig, layers: usize) -> Result<SynthSource> {
    let mut c = config.clone();
    c.n_layers = layers;
    c.vocab_size = PROBE_VOCAB;
    c.eos_token_ids.retain(|&id| (id as usize) < PROBE_VOCAB);
    c.bos_token_id = None;
    c.pad_token_id = None;
    c.max_context = c.max_context.max(PROBE_CONTEXT);
    SynthSource::new(c, 0x9E0B)
}

/// Seconds per step of the whole model from the step times of the 1-layer and the
/// [`LAYERS`]-layer probes.
pub(crate) fn predict(one: f64, many: f64, config: &ModelConfig) -> f64 {
    let per_layer = ((many - one) / (LAYERS - 1) as f64).max(0.0);
    let fixed = (one - per_layer).max(0.0);
    let c = config;
    let attn =
        c.hidden_size * (c.q_dim() + 2 * c.n_kv_heads * c.head_dim) + c.q_dim() * c.hidden_size;
    let layer_weights = (attn + 3 * c.hidden_size * c.ffn_size) as f64;
    let head_weights = (c.vocab_size * c.hidden_size) as f64;
    fixed + per_layer * (c.n_layers as f64 + head_weights / layer_weights)
}

/// Seconds per step of `step(pos)`, timed by [`StepTimer`].
pub(crate) fn seconds_per_step(mut step: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let mut t = StepTimer::default();
    let mut pos = 0;
    while t.more() {
        step(pos % PROBE_CONTEXT)?;
        pos += 1;
        t.stepped();
    }
    Ok(1.0 / t.rate().max(1e-9))
}

/// Seconds per step of the fast CPU backend on a probe.
pub(crate) fn cpu_seconds(src: &mut SynthSource) -> Result<f64> {
    let cpu = FastModel::load(src, Precision::default())?;
    let mut cache = cpu.new_cache(PROBE_CONTEXT)?;
    seconds_per_step(|pos| {
        cache.truncate(pos);
        cpu.forward(0, &mut cache).map(drop)
    })
}

/// The CPU backend's predicted seconds per step of `config`'s whole model, from its
/// probes of one and of [`LAYERS`] layers.
pub(crate) fn cpu_step(config: &ModelConfig) -> Result<f64> {
    let one = cpu_seconds(&mut probe_source(config, 1)?)?;
    let many = cpu_seconds(&mut probe_source(config, LAYERS)?)?;
    Ok(predict(one, many, config))
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::*;
    use crate::gpu::{GpuContext, GpuModel};
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::Arc;

    /// Probe the adapter of `ctx` against the CPU backend for `config`'s shapes.
    pub fn probe(ctx: &Arc<GpuContext>, config: &ModelConfig) -> Result<Decision> {
        let cpu = cpu_step(config)?;
        let gpu_seconds = |layers| {
            let mut src = probe_source(config, layers)?;
            let mut model = GpuModel::load(ctx.clone(), &mut src, PROBE_CONTEXT)?;
            seconds_per_step(|pos| model.decode(0, pos).map(drop))
        };
        let one = gpu_seconds(1)?;
        if let Some(d) = Decision::settled(cpu, one) {
            return Ok(d);
        }
        let many = gpu_seconds(LAYERS)?;
        Ok(Decision::new(cpu, predict(one, many, config)))
    }

    /// The file decisions are kept in: `$POCKETRT_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/pocketrt`, else `~/.cache/pocketrt`; `None` without any.
    fn store() -> Option<PathBuf> {
        let var = |k| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = var("POCKETRT_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("pocketrt")))
            .or_else(|| var("HOME").map(|h| h.join(".cache/pocketrt")))?;
        Some(dir.join("backend-choice.json"))
    }

    fn read_all() -> BTreeMap<String, Decision> {
        store()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default()
    }

    /// The decision kept under `key`, if any (an unreadable store is no decision).
    pub fn remembered(key: &str) -> Option<Decision> {
        read_all().remove(key)
    }

    /// Keep `decision` under `key`. Best effort: a read-only or missing cache folder only
    /// means the next load probes again.
    pub fn remember(key: &str, decision: &Decision) {
        let Some(path) = store() else { return };
        let mut all = read_all();
        all.insert(key.to_string(), decision.clone());
        let Ok(text) = serde_json::to_string_pretty(&all) else {
            return;
        };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // Written aside and renamed, so a concurrent reader never sees half a file.
        let tmp = path.with_extension(format!("json.{}", std::process::id()));
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use native::{probe, remember, remembered};

#[cfg(test)]
mod tests {
    use super::*;

    fn pocket() -> ModelConfig {
        crate::synth::preset("pocket-0.3b").unwrap()
    }

    #[test]
    fn the_prediction_is_the_fixed_cost_plus_the_layers_and_the_head_in_layer_units() {
        let c = pocket();
        // 1 layer: 3 ms, 3 layers: 7 ms → 2 ms per layer, 1 ms fixed.
        let attn = 896 * (896 + 2 * 128) + 896 * 896;
        let layer = (attn + 3 * 896 * 2560) as f64;
        let head = (65536 * 896) as f64 / layer;
        let want = 1e-3 + 2e-3 * (28.0 + head);
        assert!((predict(3e-3, 7e-3, &c) - want).abs() < 1e-12);
        // Noise that makes the larger probe faster is no negative cost.
        assert_eq!(predict(3e-3, 2e-3, &c), 3e-3);
    }

    #[test]
    fn decisions_pick_the_faster_and_keys_tell_shapes_and_adapters_apart() {
        let d = Decision::new(0.02, 0.05);
        assert!(!d.gpu);
        assert!((d.cpu_tok_s - 50.0).abs() < 1e-9 && (d.gpu_tok_s - 20.0).abs() < 1e-9);
        assert!(Decision::new(0.05, 0.02).gpu);
        assert!(d.reason("llvmpipe", true).starts_with("remembered"));
        assert!(d
            .reason("llvmpipe", false)
            .ends_with("20.0 tok/s (predicted)"));
        let c = pocket();
        let mut wider = c.clone();
        wider.ffn_size += 64;
        assert_ne!(Decision::key("a", &c), Decision::key("a", &wider));
        assert_ne!(Decision::key("a", &c), Decision::key("b", &c));
        assert_eq!(Decision::key("a", &c), Decision::key("a", &c.clone()));
    }

    #[test]
    fn a_one_layer_gpu_step_slower_than_the_whole_cpu_model_settles_the_choice() {
        let c = pocket();
        // The GPU's one-layer step bounds its prediction from below, whatever the larger
        // probe gives.
        for many in [0.0, 0.04, 0.05, 0.5] {
            assert!(predict(0.04, many, &c) >= 0.04);
        }
        let d = Decision::settled(0.03, 0.04).expect("settled");
        assert!(!d.gpu && d.gpu_bound);
        assert!((d.gpu_tok_s - 25.0).abs() < 1e-9);
        assert!(d
            .reason("SwiftShader", false)
            .ends_with("at most 25.0 tok/s (its one-layer probe)"));
        assert_eq!(
            Decision::settled(0.05, 0.04),
            None,
            "a faster GPU layer needs the larger probe"
        );
        // Older kept decisions (without the field) still read.
        let old: Decision =
            serde_json::from_str(r#"{"gpu":true,"cpu_tok_s":1,"gpu_tok_s":2}"#).unwrap();
        assert!(old.gpu && !old.gpu_bound);
    }

    #[test]
    fn a_probe_has_the_models_layer_shapes_and_a_small_vocabulary() {
        let c = pocket();
        let p = probe_source(&c, LAYERS).unwrap();
        let pc = crate::format::ModelSource::config(&p);
        assert_eq!((pc.n_layers, pc.vocab_size), (LAYERS, PROBE_VOCAB));
        assert_eq!((pc.hidden_size, pc.ffn_size, pc.n_heads), (896, 2560, 14));
        assert!(pc.eos_token_ids.iter().all(|&e| (e as usize) < PROBE_VOCAB));
    }
}
