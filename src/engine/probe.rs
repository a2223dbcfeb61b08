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
//! CPU is probed first, then the GPU from its cheapest probe up, each run only while the
//! ones before leave the choice open ([`Decision::settled`]): on a software adapter every
//! pipeline costs a JIT compile (SwiftShader: a quarter of a second each, and a layer
//! probe builds a few dozen), so the first is a single GEMV — the layer's gate/up
//! matrix in the profile's design, scaled to the model's weights ([`gemv_floor`]) — then
//! the one-layer step, and only then the larger probe.
//!
//! The decision is kept per adapter and model shape ([`Decision::key`]): natively in the
//! cache folder ([`remembered`] / [`remember`]), in the browser in Cache Storage
//! (`web/backend.rs`), so a later load of the same model skips the probe.

use crate::config::ModelConfig;
use crate::cpu::fast::{FastModel, Precision};
use crate::error::Result;
use crate::gpu::code_texture::MatrixCodes;
use crate::gpu::kernels::common::gemv::GemvQ4;
use crate::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec};
use crate::gpu::{GpuModel, ProfiledContext};
use crate::synth::SynthSource;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
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
/// GEMVs per submit of the GEMV probe, so that the submit's round trip (a browser's
/// await) is a small share of its time.
const GEMV_REPS: usize = 8;

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

    /// Seconds per timed step.
    pub(crate) fn seconds(&self) -> f64 {
        1.0 / self.rate().max(1e-9)
    }
}

/// The GPU probe whose time bounds the GPU's whole-model step from below, when it alone
/// settled the choice ([`Decision::settled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuBound {
    /// The gate/up GEMV scaled to the model's weights ([`gemv_floor`]).
    Gemv,
    /// The one-layer step ([`predict`] only adds layers and the head to it).
    OneLayer,
}

impl GpuBound {
    fn probe(self) -> &'static str {
        match self {
            GpuBound::Gemv => "its GEMV probe",
            GpuBound::OneLayer => "its one-layer probe",
        }
    }
}

/// The outcome of a probe: predicted full-model decode rates and the choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub gpu: bool,
    pub cpu_tok_s: f64,
    /// The GPU's predicted rate, or (with `bound`) an upper bound of it.
    pub gpu_tok_s: f64,
    /// The probe that settled the choice when `gpu_tok_s` is only an upper bound (its
    /// rate); `None`: predicted from both layer probes.
    #[serde(default)]
    pub bound: Option<GpuBound>,
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
            bound: None,
        }
    }

    /// The CPU, when `gpu_floor` seconds — what the GPU's whole-model step costs at
    /// least, from the probe `bound` — is no faster than the CPU's predicted whole-model
    /// step: the GPU's larger probes could not change the choice. `None` when they could.
    pub(crate) fn settled(cpu_step: f64, gpu_floor: f64, bound: GpuBound) -> Option<Decision> {
        (gpu_floor >= cpu_step).then(|| Decision {
            gpu: false,
            cpu_tok_s: rate(cpu_step),
            gpu_tok_s: rate(gpu_floor),
            bound: Some(bound),
        })
    }

    /// What was decided and why, for `info` / `-v`.
    pub fn reason(&self, adapter: &str, remembered: bool) -> String {
        let how = if remembered {
            "remembered from an earlier probe"
        } else {
            "chosen by a probe of the model's layer shapes"
        };
        let gpu = match self.bound {
            Some(b) => format!("at most {:.1} tok/s ({})", self.gpu_tok_s, b.probe()),
            None => format!("{:.1} tok/s (predicted)", self.gpu_tok_s),
        };
        format!(
            "{how}: CPU {:.1} tok/s vs software GPU adapter {adapter} {gpu}",
            self.cpu_tok_s
        )
    }

    /// The key a decision is kept under: the adapter and every shape a step's cost
    /// depends on.
    pub fn key(adapter: &str, c: &ModelConfig) -> String {
        format!("{}|{adapter}|{}", env!("CARGO_PKG_VERSION"), c.shape_key())
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
    let w = Weights::of(config);
    fixed + per_layer * (config.n_layers as f64 + w.head / w.layer)
}

/// Weights (matrix entries) of a step's GEMVs.
struct Weights {
    /// One layer's: QKV, O, gate/up, down.
    layer: f64,
    /// The LM head's.
    head: f64,
    /// One layer's gate/up matrix.
    gate_up: f64,
}

impl Weights {
    fn of(c: &ModelConfig) -> Weights {
        let attn =
            c.hidden_size * (c.q_dim() + 2 * c.n_kv_heads * c.head_dim) + c.q_dim() * c.hidden_size;
        Weights {
            layer: (attn + 3 * c.hidden_size * c.ffn_size) as f64,
            head: (c.vocab_size * c.hidden_size) as f64,
            gate_up: (2 * c.hidden_size * c.ffn_size) as f64,
        }
    }
}

/// What the whole model's step costs at least on a GPU whose gate/up GEMV takes
/// `gate_up` seconds: every GEMV of the step (all layers' and the head) at the gate/up
/// GEMV's time per weight, without the other kernels or the step's fixed cost. A
/// floor as far as GEMVs with fewer rows (O, down) fill the device no better per weight
/// than the widest one — true of the CPU adapters this probe runs on, which split work by
/// workgroups.
pub(crate) fn gemv_floor(gate_up: f64, config: &ModelConfig) -> f64 {
    let w = Weights::of(config);
    gate_up * (config.n_layers as f64 * w.layer + w.head) / w.gate_up
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
    Ok(t.seconds())
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

/// Probe the software adapter of `ctx` against the CPU backend for `config`'s shapes:
/// the CPU's probes, then the GPU's from the cheapest up — its gate/up GEMV, its
/// one-layer step, its larger probe — each only while the ones before leave the choice
/// open. Async for the browser, where GPU results arrive as awaited events (natively
/// each await is ready at once: `pollster::block_on` it).
pub async fn probe(ctx: &Arc<ProfiledContext>, config: &ModelConfig) -> Result<Decision> {
    let cpu = cpu_step(config)?;
    let gemv = gemv_floor(gpu_gemv_seconds(ctx, config).await?, config);
    if let Some(d) = Decision::settled(cpu, gemv, GpuBound::Gemv) {
        return Ok(d);
    }
    let one = gpu_seconds(ctx, config, 1).await?;
    if let Some(d) = Decision::settled(cpu, one, GpuBound::OneLayer) {
        return Ok(d);
    }
    let many = gpu_seconds(ctx, config, LAYERS).await?;
    Ok(Decision::new(cpu, predict(one, many, config)))
}

/// Seconds per step of a probe of `layers` layers on the adapter of `ctx`.
async fn gpu_seconds(
    ctx: &Arc<ProfiledContext>,
    config: &ModelConfig,
    layers: usize,
) -> Result<f64> {
    let mut src = probe_source(config, layers)?;
    let mut model = GpuModel::load(ctx.clone(), &mut src, PROBE_CONTEXT)?;
    let mut t = StepTimer::default();
    let mut pos = 0;
    while t.more() {
        model.decode_async(0, pos % PROBE_CONTEXT).await?;
        pos += 1;
        t.stepped();
    }
    model.destroy();
    Ok(t.seconds())
}

/// Seconds per gate/up GEMV of `config`'s layer shape (with its fused norm and SwiGLU)
/// in the design the profile of `ctx` gives that role: one pipeline, over zero codes (a
/// GEMV's time does not depend on its values), [`GEMV_REPS`] to a submit.
async fn gpu_gemv_seconds(ctx: &ProfiledContext, config: &ModelConfig) -> Result<f64> {
    let (ffn, hidden) = (config.ffn_size, config.hidden_size);
    let spec = GemvSpec {
        norm_eps: Some(config.rms_eps),
        ..GemvSpec::new(ffn, hidden, Epilogue::SwiGlu)
    };
    let gemv = GemvQ4::new(ctx, ctx.profile.gemv.gate_up, spec)?;
    let entries = (2 * ffn * hidden) as u64;
    let buffer = ctx.storage("probe codes", entries / 2)?;
    let qparams = ctx.storage("probe qparams", entries / 16)?;
    let texture = gemv
        .codes_read()
        .build(ctx, (&buffer, entries / 2), &qparams, None)?;
    let codes = MatrixCodes { buffer, texture };
    // x doubles as the norm weights and the (unread) bias.
    let x = ctx.storage("probe x", 4 * hidden as u64)?;
    let out = ctx.storage("probe out", 4 * ffn as u64)?;
    let staging = ctx.staging("probe", 4);
    let dispatch = gemv.dispatch(ctx, codes.bind(), &qparams, &x, Some(&x), &x, &out);
    ctx.check_errors()?;
    let mut t = StepTimer::default();
    while t.more() {
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            for _ in 0..GEMV_REPS {
                dispatch.encode(&mut pass);
            }
        }
        enc.copy_buffer_to_buffer(&out, 0, &staging, 0, 4);
        ctx.queue.submit([enc.finish()]);
        ctx.read_staging_async(&staging, 4).await?;
        t.stepped();
    }
    drop(dispatch);
    for b in [codes.buffer, qparams, x, out, staging] {
        b.destroy();
    }
    Ok(t.seconds() / GEMV_REPS as f64)
}

/// The kind of kept decision a probe's is (natively `crate::kept`; the browser's
/// `web/kept.rs`).
#[cfg(not(target_arch = "wasm32"))]
const KEPT: &str = "backend-choice";

/// The decision kept under `key`, if any.
#[cfg(not(target_arch = "wasm32"))]
pub fn remembered(key: &str) -> Option<Decision> {
    crate::kept::remembered(KEPT, key)
}

/// Keep `decision` under `key` (best effort: else the next load probes again).
#[cfg(not(target_arch = "wasm32"))]
pub fn remember(key: &str, decision: &Decision) {
    crate::kept::remember(KEPT, key, decision)
}

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
        let d = Decision::settled(0.03, 0.04, GpuBound::OneLayer).expect("settled");
        assert!(!d.gpu && d.bound == Some(GpuBound::OneLayer));
        assert!((d.gpu_tok_s - 25.0).abs() < 1e-9);
        assert!(d
            .reason("SwiftShader", false)
            .ends_with("at most 25.0 tok/s (its one-layer probe)"));
        assert_eq!(
            Decision::settled(0.05, 0.04, GpuBound::OneLayer),
            None,
            "a faster GPU layer needs the larger probe"
        );
        // Older kept decisions (without the field) still read.
        let old: Decision =
            serde_json::from_str(r#"{"gpu":true,"cpu_tok_s":1,"gpu_tok_s":2}"#).unwrap();
        assert!(old.gpu && old.bound.is_none());
    }

    #[test]
    fn the_gemv_floor_is_every_gemv_of_the_step_at_the_gate_up_gemvs_time_per_weight() {
        let c = pocket();
        let gate_up = 2.0 * 896.0 * 2560.0;
        let layer = (896 * (896 + 2 * 128) + 896 * 896 + 3 * 896 * 2560) as f64;
        let want = 1e-3 * (28.0 * layer + 65536.0 * 896.0) / gate_up;
        assert!((gemv_floor(1e-3, &c) - want).abs() < 1e-12);
        // Pocket's step has 66 gate/up GEMVs' weights.
        assert!((gemv_floor(1.0, &c) - 66.0).abs() < 1e-9);
        let d = Decision::settled(0.05, gemv_floor(1e-3, &c), GpuBound::Gemv).expect("settled");
        assert!(d.reason("SwiftShader", false).ends_with("(its GEMV probe)"));
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains(r#""bound":"gemv""#), "{json}");
        assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
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
