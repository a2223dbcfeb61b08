//! `Backend::Auto` on a software GPU adapter (lavapipe, SwiftShader, WARP): such an
//! adapter runs the GPU kernels on the very CPU cores the CPU backend would use, usually
//! slower, so both models are loaded, a few decode steps are timed on each (well under a
//! second on a 0.5B model), and the faster one is kept. [`StepTimer`] and [`verdict`] are
//! shared with the browser (`web/backend.rs`), where GPU steps are awaited.

#[cfg(not(target_arch = "wasm32"))]
use super::{Engine, Inner};
#[cfg(not(target_arch = "wasm32"))]
use crate::cpu::fast::{FastModel, Precision};
#[cfg(not(target_arch = "wasm32"))]
use crate::error::Result;
#[cfg(not(target_arch = "wasm32"))]
use crate::format::ModelSource;
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::GpuContext;
use web_time::{Duration, Instant};

/// Timed steps after the warm-up one (which compiles pipelines and faults pages in).
const STEPS: usize = 2;
/// Stop timing after this long even if fewer steps ran (a very slow adapter).
const MAX_TIME: Duration = Duration::from_millis(400);

/// The timing of one calibration: one warm-up step, then up to `STEPS` timed steps or
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

/// Whether the GPU won, and the sentence saying what was measured.
pub(crate) fn verdict(cpu_rate: f64, gpu_rate: f64, adapter: &str) -> (bool, String) {
    let measured = format!(
        "chosen by calibration: CPU {cpu_rate:.1} tok/s vs software GPU adapter {adapter} \
         {gpu_rate:.1} tok/s"
    );
    (gpu_rate > cpu_rate, measured)
}

/// Decode steps per second of `step(pos)` (timed by [`StepTimer`]).
#[cfg(not(target_arch = "wasm32"))]
fn steps_per_second(mut step: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let mut t = StepTimer::default();
    let mut pos = 0;
    while t.more() {
        step(pos)?;
        pos += 1;
        t.stepped();
    }
    Ok(t.rate())
}

/// Positions a CPU calibration cache needs.
pub(crate) const CACHE: usize = STEPS + 1;

/// Load `src` on the software adapter `ctx` (context `gpu_context`) and on the fast CPU
/// backend (context `cpu_context`), time both, and return the faster with its context and
/// a description saying what was measured.
#[cfg(not(target_arch = "wasm32"))]
pub(super) fn faster(
    ctx: GpuContext,
    src: &mut dyn ModelSource,
    gpu_context: usize,
    cpu_context: usize,
) -> Result<(Inner, usize, String)> {
    let adapter = format!("{} ({})", ctx.adapter.name, ctx.adapter.backend);
    let (mut gpu, gpu_description) = Engine::load_gpu(std::sync::Arc::new(ctx), src, gpu_context)?;
    // Positions wrap inside the plan's context; the engine overwrites them from 0 later.
    let gpu_rate = steps_per_second(|i| gpu.decode(0, i % gpu_context).map(drop))?;

    let cpu = FastModel::load(src, Precision::default())?;
    let mut scratch = cpu.new_cache(CACHE)?;
    let cpu_rate = steps_per_second(|_| cpu.forward(0, &mut scratch).map(drop))?;
    let (gpu_won, measured) = verdict(cpu_rate, gpu_rate, &adapter);
    if gpu_won {
        drop(cpu);
        let description = format!("{gpu_description}; {measured}");
        Ok((Inner::Gpu(gpu), gpu_context, description))
    } else {
        drop(gpu);
        let description = format!("cpu ({}; q4 weights); {measured}", cpu.describe());
        let cache = cpu.new_cache(cpu_context)?;
        let inner = Inner::Cpu {
            model: Box::new(cpu),
            cache,
        };
        Ok((inner, cpu_context, description))
    }
}
