//! The final hidden states of a sequence, for embeddings (`crate::embed`): the tokens run
//! through batched prefill's kernels (the pipelines every load builds; no head, no new
//! shader), each chunk's residual rows copied into one staging buffer, read back once.
//! The GPU's output norm lives fused in the head GEMV, so the rows come back before it and
//! the host applies it (the oracle's `rmsnorm`, with `output_norm.weight` copied back in
//! the same readback).

use super::GpuModel;
use crate::error::Result;

/// A pending readback: the staging buffer, its bytes, and the rows it holds.
struct HiddenRead {
    staging: wgpu::Buffer,
    bytes: u64,
    rows: usize,
}

impl GpuModel {
    /// Encode and submit `tokens` at positions `start..` chunk by chunk, each chunk's
    /// residual rows copied after it into a staging buffer (followed by the output norm's
    /// weights); `bound` is called with each submission (the in-flight bound).
    fn submit_hidden(
        &mut self,
        tokens: &[u32],
        start: usize,
        mut bound: impl FnMut(&mut Self, wgpu::SubmissionIndex) -> Result<()>,
    ) -> Result<HiddenRead> {
        self.check_prefill(tokens, start)?;
        let row = 4 * self.config.hidden_size as u64;
        let rows_bytes = row * tokens.len() as u64;
        let bytes = rows_bytes + row;
        // Lives for one readback: not part of the model's planned memory.
        let staging = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("hidden states"),
            size: crate::gpu::buffers::padded(bytes),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let len = self.prefill_chunk_len();
        for (i, part) in tokens.chunks(len).enumerate() {
            let at = start + i * len;
            let mut enc = self.encode_chunk(part, at)?;
            let offset = row * (i * len) as u64;
            let chunk_bytes = row * part.len() as u64;
            enc.copy_buffer_to_buffer(&self.prefill.x, 0, &staging, offset, chunk_bytes);
            if (i + 1) * len >= tokens.len() {
                let norm = &self.weights.output_norm;
                enc.copy_buffer_to_buffer(norm, 0, &staging, rows_bytes, row);
            }
            let index = self.submit(enc.finish());
            bound(self, index)?;
        }
        Ok(HiddenRead {
            staging,
            bytes,
            rows: tokens.len(),
        })
    }

    /// The rows read back, normed: `[token][hidden]`.
    fn normed_rows(&self, read: &HiddenRead, bytes: &[u8]) -> Vec<f32> {
        let width = self.config.hidden_size;
        let values: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[..read.bytes as usize]);
        let (rows, norm) = values.split_at(read.rows * width);
        let mut rows = rows.to_vec();
        for row in rows.chunks_exact_mut(width) {
            crate::cpu::ops::rmsnorm(row, norm, self.config.rms_eps);
        }
        rows
    }

    /// `run`'s result after the KV rows `0..kept` it overwrote are written back from
    /// `saved` (read before it, [`GpuModel::read_kv`]): put back even when the run failed
    /// part way; the run's error first, then the write's.
    pub fn with_kv_put_back(
        &mut self,
        kept: usize,
        saved: &[u8],
        run: Result<Vec<f32>>,
    ) -> Result<Vec<f32>> {
        let restored = match kept {
            0 => Ok(()),
            _ => self.write_kv(0, kept, saved),
        };
        let rows = run?;
        restored?;
        Ok(rows)
    }

    /// Run `tokens` at positions `start..` (written into the KV cache like a prefill)
    /// and return each one's final hidden state after the output norm, `[token][hidden]`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn hidden_states(&mut self, tokens: &[u32], start: usize) -> Result<Vec<f32>> {
        let read = self.submit_hidden(tokens, start, Self::bound_in_flight)?;
        let bytes = self.ctx.read_staging(&read.staging, read.bytes);
        read.staging.destroy();
        Ok(self.normed_rows(&read, &bytes?))
    }

    /// [`GpuModel::hidden_states`], awaiting the readback (the browser). The chunks are
    /// bounded in flight only by the one readback at the end (an embedding input fits
    /// the context, a few chunks).
    pub async fn hidden_states_async(&mut self, tokens: &[u32], start: usize) -> Result<Vec<f32>> {
        let read = self.submit_hidden(tokens, start, |_, _| Ok(()))?;
        let bytes = self.ctx.read_staging_async(&read.staging, read.bytes).await;
        read.staging.destroy();
        Ok(self.normed_rows(&read, &bytes?))
    }
}
