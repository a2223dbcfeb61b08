//! GPU time of a compute pass from timestamp queries (where the adapter has them), for
//! benchmarks: the time the device spent between the start and the end of the pass.

use super::device::GpuContext;
#[cfg(not(target_arch = "wasm32"))]
use super::kernels::Dispatch;
#[cfg(not(target_arch = "wasm32"))]
use crate::error::Result;

/// Two timestamps (pass start, pass end), resolved into a readback buffer.
pub struct GpuTimer {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    staging: wgpu::Buffer,
    /// Nanoseconds per timestamp tick (read back natively only; benchmarks are native).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    period_ns: f64,
}

impl GpuTimer {
    /// A timer, or `None` when the device has no timestamp queries.
    pub fn new(ctx: &GpuContext) -> Option<GpuTimer> {
        if !ctx.adapter.features.timestamp_query {
            return None;
        }
        let queries = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("pass timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("timestamps"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        Some(GpuTimer {
            queries,
            resolve,
            staging: ctx.staging("timestamps", 16),
            period_ns: f64::from(ctx.queue.get_timestamp_period()),
        })
    }

    /// Pass descriptor fields that stamp the start and end of the pass.
    pub fn pass_writes(&self) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }
    }

    /// After the pass: copy the stamps to the readback buffer.
    pub fn resolve(&self, enc: &mut wgpu::CommandEncoder) {
        enc.resolve_query_set(&self.queries, 0..2, &self.resolve, 0);
        enc.copy_buffer_to_buffer(&self.resolve, 0, &self.staging, 0, 16);
    }

    /// Nanoseconds between the stamps of the last submitted pass (waits for it).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_ns(&self, ctx: &GpuContext) -> Result<f64> {
        let bytes = ctx.read_staging(&self.staging, 16)?;
        let t: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes);
        Ok(t[1].saturating_sub(t[0]) as f64 * self.period_ns)
    }
}

/// Seconds the device spends on `dispatches` encoded `repeat` times in one compute pass:
/// from timestamps when `timer` is given, else wall time of submit + wait. Per repeat.
#[cfg(not(target_arch = "wasm32"))]
pub fn time_dispatches(
    ctx: &GpuContext,
    timer: Option<&GpuTimer>,
    dispatches: &[&Dispatch],
    repeat: usize,
) -> Result<f64> {
    time_pass(ctx, timer, repeat, |pass| {
        dispatches.iter().for_each(|d| d.encode(pass))
    })
}

/// [`time_dispatches`] for whatever `encode` records into the pass (called `repeat` times).
#[cfg(not(target_arch = "wasm32"))]
pub fn time_pass(
    ctx: &GpuContext,
    timer: Option<&GpuTimer>,
    repeat: usize,
    encode: impl Fn(&mut wgpu::ComputePass<'_>),
) -> Result<f64> {
    let t0 = std::time::Instant::now();
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("timed"),
            timestamp_writes: timer.map(GpuTimer::pass_writes),
        });
        for _ in 0..repeat {
            encode(&mut pass);
        }
    }
    if let Some(t) = timer {
        t.resolve(&mut enc);
    }
    ctx.queue.submit([enc.finish()]);
    let seconds = match timer {
        Some(t) => t.read_ns(ctx)? * 1e-9,
        None => {
            ctx.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| crate::Error::Gpu(format!("waiting for the GPU: {e}")))?;
            t0.elapsed().as_secs_f64()
        }
    };
    Ok(seconds / repeat.max(1) as f64)
}
