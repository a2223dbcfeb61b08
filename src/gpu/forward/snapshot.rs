//! The KV cache's rows in and out, for session snapshots (`crate::session`): a span of
//! positions read back in one submit (staging in parts of at most [`READ_PART`] bytes),
//! or written with `queue.write_buffer`, in the snapshot's order ([`KvCache::encode_read`]).

use super::GpuModel;
use crate::error::Result;

/// Largest staging buffer of one readback part (under every device's buffer limit).
const READ_PART: u64 = 64 << 20;

impl GpuModel {
    /// Positions of one readback part.
    fn part_positions(&self) -> usize {
        let per = self.kv.span_bytes(1).max(1);
        (READ_PART / per).max(1) as usize
    }

    /// A staging buffer for `count` positions' rows (not counted in the model's
    /// memory: it lives for one readback) and the copy into it, submitted.
    fn submit_kv_read(&self, start: usize, count: usize) -> Result<(wgpu::Buffer, u64)> {
        let bytes = self.kv.span_bytes(count);
        let staging = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kv_snapshot"),
            size: crate::gpu::buffers::padded(bytes),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        self.kv.encode_read(&mut enc, start, count, &staging)?;
        self.submit(enc.finish());
        Ok((staging, bytes))
    }

    /// The rows of positions `start..start + count`, as a snapshot stores them.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_kv(&self, start: usize, count: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.kv.span_bytes(count) as usize);
        for (s, n) in parts(start, count, self.part_positions()) {
            let (staging, bytes) = self.submit_kv_read(s, n)?;
            let part = self.ctx.read_staging(&staging, bytes);
            staging.destroy();
            interleave(&mut out, &part?, self.kv.runs_count(), n, count, s - start);
        }
        Ok(out)
    }

    /// [`GpuModel::read_kv`], awaiting the readback (the browser).
    pub async fn read_kv_async(&self, start: usize, count: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.kv.span_bytes(count) as usize);
        for (s, n) in parts(start, count, self.part_positions()) {
            let (staging, bytes) = self.submit_kv_read(s, n)?;
            let part = self.ctx.read_staging_async(&staging, bytes).await;
            staging.destroy();
            interleave(&mut out, &part?, self.kv.runs_count(), n, count, s - start);
        }
        Ok(out)
    }

    /// Write `rows` (positions `start..start + count`, as [`GpuModel::read_kv`] gives
    /// them) into the cache; the queue orders it before the next step.
    pub fn write_kv(&self, start: usize, count: usize, rows: &[u8]) -> Result<()> {
        // A step submitted ahead attended to the rows these replace.
        self.ahead.set(None);
        self.kv.write(&self.ctx.queue, start, count, rows)?;
        self.ctx.check_errors()
    }
}

/// The span cut into parts of at most `each` positions.
fn parts(start: usize, count: usize, each: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..count)
        .step_by(each)
        .map(move |i| (start + i, each.min(count - i)))
}

/// Place a part's `runs` runs (each of `n` positions) into the whole span's (each of
/// `count` positions), `at` positions into each; `out` is sized on the first part.
fn interleave(out: &mut Vec<u8>, part: &[u8], runs: usize, n: usize, count: usize, at: usize) {
    if n == count {
        out.extend_from_slice(part);
        return;
    }
    let position = part.len() / (runs * n).max(1);
    let (run_part, run_whole) = (n * position, count * position);
    out.resize(runs * run_whole, 0);
    for (r, run) in part.chunks_exact(run_part.max(1)).enumerate() {
        let dst = r * run_whole + at * position;
        out[dst..dst + run_part].copy_from_slice(run);
    }
}
