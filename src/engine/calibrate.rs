//! `Backend::Auto` on a software GPU adapter (lavapipe, SwiftShader, WARP): such an
//! adapter runs the GPU kernels on the very CPU cores the CPU backend would use, usually
//! slower, so both models are loaded, a few decode steps are timed on each (well under a
//! second on a 0.5B model), and the faster one is kept.

use super::{Engine, Inner};
use crate::cpu::fast::{FastModel, Precision};
use crate::error::Result;
use crate::format::ModelSource;
use crate::gpu::GpuContext;
use web_time::{Duration, Instant};

/// Timed steps after the warm-up one (which compiles pipelines and faults pages in).
const STEPS: usize = 2;
/// Stop timing after this long even if fewer steps ran (a very slow adapter).
const MAX_TIME: Duration = Duration::from_millis(400);

/// Decode steps per second of `step(pos)`: one warm-up step, then up to `STEPS` timed
/// steps or `MAX_TIME`, whichever ends first.
fn steps_per_second(mut step: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    step(0)?;
    let t = Instant::now();
    let mut n = 0;
    while n < STEPS && (n == 0 || t.elapsed() < MAX_TIME) {
        n += 1;
        step(n)?;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64().max(1e-9))
}

/// Load `src` on the software adapter `ctx` (context `gpu_context`) and on the fast CPU
/// backend (context `cpu_context`), time both, and return the faster with its context and
/// a description saying what was measured.
pub(super) fn faster(
    ctx: GpuContext,
    src: &mut dyn ModelSource,
    gpu_context: usize,
    cpu_context: usize,
) -> Result<(Inner, usize, String)> {
    let adapter = format!("{} ({})", ctx.adapter.name, ctx.adapter.backend);
    let (mut gpu, gpu_description) = Engine::load_gpu(ctx, src, gpu_context)?;
    // Positions wrap inside the plan's context; the engine overwrites them from 0 later.
    let gpu_rate = steps_per_second(|i| gpu.decode(0, i % gpu_context).map(drop))?;

    let cpu = FastModel::load(src, Precision::default())?;
    let mut scratch = cpu.new_cache(STEPS + 1)?;
    let cpu_rate = steps_per_second(|_| cpu.forward(0, &mut scratch).map(drop))?;
    let measured = format!(
        "chosen by calibration: CPU {cpu_rate:.1} tok/s vs software GPU adapter {adapter} \
         {gpu_rate:.1} tok/s"
    );
    if gpu_rate > cpu_rate {
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
