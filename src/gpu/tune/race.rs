//! Timing candidates fairly: a design is always timed in turns with the best so far.
//!
//! A real GPU's clocks move under the sweep: on an H200 the first design timed after the
//! GPU had been busy ran a step in 3.2 ms, and the same step 6–7 ms after the idle
//! fraction of a second in which the next candidate's pipelines were built (its clocks
//! down), so a design timed alone is compared with another timed at other clocks. Here the
//! sweep first keeps the GPU busy for [`WARM_UP`], and then times each candidate and the
//! best so far in alternating rounds ([`ROUNDS`] of [`STEPS`] steps each, the best step of
//! each side kept): whatever the clocks do, both see it alike.

use super::Tuned;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::gpu::forward::StepOptions;
use crate::gpu::weights::ModelWeights;
use crate::gpu::{GpuModel, ProfiledContext};
use std::sync::Arc;
use web_time::{Duration, Instant};

/// The GPU is kept busy this long before the first timing (its clocks up).
pub const WARM_UP: Duration = Duration::from_millis(150);
/// Timed rounds per side of a race, alternating.
pub const ROUNDS: usize = 3;
const _: () = assert!(ROUNDS >= 1);
/// Decode steps per round.
pub const STEPS: usize = 4;

/// A design's best decode step.
#[derive(Clone, Copy, Debug)]
pub struct Timed {
    /// By [`Timed::by`]: the sweep compares these.
    pub seconds: f64,
    /// By wall clock, a step awaited (submit to its token read); by the wall clock timer,
    /// [`Timed::seconds`] (steps queued, the last one awaited).
    pub wall_seconds: f64,
    pub by: &'static str,
}

impl Timed {
    fn best(self, other: Timed) -> Timed {
        Timed {
            seconds: self.seconds.min(other.seconds),
            wall_seconds: self.wall_seconds.min(other.wall_seconds),
            by: self.by,
        }
    }
}

/// A candidate built: its design and a model of it over the shared weights.
pub struct Built {
    pub design: Tuned,
    pub model: GpuModel,
}

impl Built {
    /// `design` as a model of its own with a `context`-position cache, over `weights`.
    // One `Arc` type on every target (in wasm the context is neither Send nor Sync).
    #[allow(clippy::arc_with_non_send_sync)]
    pub fn new(
        ctx: &ProfiledContext,
        config: &ModelConfig,
        weights: &ModelWeights,
        design: Tuned,
        context: usize,
    ) -> Result<Built> {
        let candidate = Arc::new(ctx.with_device_profile(design.apply(&ctx.profile)));
        let options = StepOptions::default();
        let model =
            GpuModel::with_options(candidate, config.clone(), weights.clone(), context, options)?;
        // Timestamps where the adapter has them (natively), else `round` times by wall clock.
        #[cfg(not(target_arch = "wasm32"))]
        let model = {
            let mut model = model;
            model.enable_gpu_timing();
            model
        };
        Ok(Built { design, model })
    }

    /// Free the model's own buffers (the weights stay).
    pub fn release(self) {
        drop(self.model.release());
    }

    /// Decode steps at `pos` until [`WARM_UP`] has passed (one at least).
    pub async fn warm_up(&mut self, pos: usize) -> Result<()> {
        let t = Instant::now();
        for step in 0.. {
            if step >= 1 && t.elapsed() >= WARM_UP {
                break;
            }
            self.model.decode_async(0, pos).await?;
        }
        Ok(())
    }

    /// This design alone: [`ROUNDS`] rounds, the best step.
    pub async fn time(&mut self, pos: usize) -> Result<Timed> {
        let [t] = rounds([&mut self.model], pos).await?;
        Ok(t)
    }
}

/// `a` and `b` timed in turns (a warm-up step each first): each one's best step.
pub async fn race(a: &mut Built, b: &mut Built, pos: usize) -> Result<(Timed, Timed)> {
    a.model.decode_async(0, pos).await?;
    b.model.decode_async(0, pos).await?;
    let [ta, tb] = rounds([&mut a.model, &mut b.model], pos).await?;
    Ok((ta, tb))
}

/// [`ROUNDS`] rounds of each model in turn: each one's best step.
async fn rounds<const N: usize>(mut models: [&mut GpuModel; N], pos: usize) -> Result<[Timed; N]> {
    let mut best: [Option<Timed>; N] = [None; N];
    for _ in 0..ROUNDS {
        for (model, best) in models.iter_mut().zip(&mut best) {
            let t = round(model, pos).await?;
            *best = Some(best.map_or(t, |b| b.best(t)));
        }
    }
    Ok(best.map(|t| t.expect("ROUNDS ≥ 1")))
}

/// One round of [`STEPS`] steps at `pos`: by the pass's GPU timestamps where the adapter
/// has them (natively), each step awaited; else by wall clock over queued steps.
async fn round(model: &mut GpuModel, pos: usize) -> Result<Timed> {
    #[cfg(not(target_arch = "wasm32"))]
    if model.gpu_timing_enabled() {
        let (mut best, mut wall) = (f64::MAX, f64::MAX);
        for _ in 0..STEPS {
            let t = Instant::now();
            model.decode_async(0, pos).await?;
            wall = wall.min(t.elapsed().as_secs_f64());
            best = best.min(model.last_step_gpu_seconds()?.unwrap_or(f64::MAX));
        }
        return Ok(Timed {
            seconds: best,
            wall_seconds: wall,
            by: "gpu timestamps",
        });
    }
    let t = Instant::now();
    for _ in 1..STEPS {
        model.feed_async(0, pos).await?;
    }
    model.decode_async(0, pos).await?;
    let seconds = t.elapsed().as_secs_f64() / STEPS as f64;
    Ok(Timed {
        seconds,
        wall_seconds: seconds,
        by: "wall clock",
    })
}
