//! GPU time of a compute pass from timestamp queries (where the adapter has them), for
//! benchmarks: the time the device spent between the start and the end of the pass.

use super::device::GpuContext;
#[cfg(not(target_arch = "wasm32"))]
use super::kernels::read_bench::{ReadBench, ReadLayout};
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

/// Best seconds per dispatch of `d`: one warm-up pass, then the fastest of `passes`
/// passes of `repeat` dispatches each (the machine may be shared).
#[cfg(not(target_arch = "wasm32"))]
pub fn best_time(
    ctx: &GpuContext,
    timer: Option<&GpuTimer>,
    d: &Dispatch,
    repeat: usize,
    passes: usize,
) -> Result<f64> {
    time_dispatches(ctx, timer, &[d], 1)?;
    let mut best = f64::INFINITY;
    for _ in 0..passes.max(1) {
        best = best.min(time_dispatches(ctx, timer, &[d], repeat)?);
    }
    Ok(best)
}

/// One grid of the read kernel ([`ReadBench`]) and the GB/s it reached.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadRun {
    pub layout: ReadLayout,
    pub workgroups: u32,
    pub gb_s: f64,
}

/// The read ceiling of an adapter: GB/s of a vec4 sum over a storage buffer
/// ([`ReadBench`]), the best of a few grid sizes and both layouts (the chunked layout sums
/// the largest multiple of its step that fits). Benchmarks state a kernel's effective
/// bandwidth against it (the roofline ratio).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Debug, PartialEq)]
pub struct ReadCeiling {
    /// Bytes of the buffer.
    pub bytes: u64,
    pub best: ReadRun,
    pub tried: Vec<ReadRun>,
}

#[cfg(not(target_arch = "wasm32"))]
impl ReadCeiling {
    /// Measure over `len` f32, each grid timed by [`best_time`] (`repeat`, `passes`).
    pub fn measure(
        ctx: &GpuContext,
        timer: Option<&GpuTimer>,
        len: usize,
        repeat: usize,
        passes: usize,
    ) -> Result<ReadCeiling> {
        let data = ctx.storage("read data", 4 * len as u64)?;
        let mut tried = vec![];
        for layout in [ReadLayout::Interleaved, ReadLayout::Chunked] {
            for workgroups in [2u32, 8, 32, 128, 512] {
                let step = ReadBench::step(workgroups, layout);
                let Ok(k) = ReadBench::new(ctx, len / step * step, workgroups, layout) else {
                    continue; // a grid too large for the buffer
                };
                let out = ctx.storage("partials", 4 * k.partials() as u64)?;
                let d = k.dispatch(ctx, &data, &out);
                let seconds = best_time(ctx, timer, &d, repeat, passes)?;
                let gb_s = 4.0 * k.len as f64 / seconds / 1e9;
                tried.push(ReadRun {
                    layout,
                    workgroups,
                    gb_s,
                });
            }
        }
        let best = tried
            .iter()
            .copied()
            .max_by(|a, b| a.gb_s.total_cmp(&b.gb_s))
            .ok_or_else(|| crate::Error::InvalidArgument(format!("no read grid fits {len} f32")))?;
        Ok(ReadCeiling {
            bytes: 4 * len as u64,
            best,
            tried,
        })
    }

    /// `{kernel, gb_s, workgroups, layout, tried: [{layout, workgroups, gb_s}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let run = |r: &ReadRun| {
            serde_json::json!({
                "layout": format!("{:?}", r.layout), "workgroups": r.workgroups, "gb_s": r.gb_s,
            })
        };
        serde_json::json!({
            "kernel": format!("vec4 sum of {} bytes", self.bytes), "gb_s": self.best.gb_s,
            "workgroups": self.best.workgroups, "layout": format!("{:?}", self.best.layout),
            "tried": self.tried.iter().map(run).collect::<Vec<_>>(),
        })
    }
}
