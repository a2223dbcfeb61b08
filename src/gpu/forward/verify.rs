//! Speculative decoding's verification step: the last token and the drafts after it run
//! through the target at positions `pos..pos + n` in ONE submit with ONE readback, every
//! position's KV row written, and each position's logits (or only its argmax) come back.
//! Rejected drafts are rolled back by moving the position back: the next step overwrites
//! their KV rows.
//!
//! The step is decode's own, recorded `n` times back to back in one command buffer (each
//! preceded by a copy of that position's step uniform into the step buffer, each followed
//! by copies of its argmax and logits into row `i` of the readback): the same pipelines,
//! bind groups and grids as [`GpuModel::decode`], so every row is bit for bit what decode
//! computes there, and greedy speculation's tokens are exactly greedy decoding's. Batched
//! prefill's GEMMs accumulate in another order than the GEMVs (and flipped near-tied
//! argmaxes on the real model: docs/ARCHITECTURE.md, "Batched prefill"), so they are not
//! used here, in any profile.

use super::GpuModel;
use crate::error::{Error, Result};
use crate::gpu::buffers::padded;
use crate::gpu::StepUniform;

/// Most positions one verification step runs (the last token and up to 31 drafts).
pub const VERIFY_MAX_TOKENS: usize = 32;

const STEP_BYTES: u64 = std::mem::size_of::<StepUniform>() as u64;

/// What a verification step reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rows {
    /// Each position's argmax (4 bytes).
    Argmax,
    /// Each position's logits (vocab × f32).
    Logits,
}

/// The verification step's buffers, made on its first use (a model that never
/// speculates holds none; not in the memory plan: at most
/// [`VERIFY_MAX_TOKENS`] × vocab × 4 bytes of staging, made once per model).
pub(super) struct VerifyBuffers {
    /// The positions' step uniforms, copied one by one into the step buffer.
    steps: wgpu::Buffer,
    /// The positions' argmaxes.
    argmax: wgpu::Buffer,
    /// The positions' logits, made when first asked for.
    logits: Option<wgpu::Buffer>,
}

impl VerifyBuffers {
    pub(super) fn destroy(&self) {
        for b in [&self.steps, &self.argmax].into_iter().chain(&self.logits) {
            b.destroy();
        }
    }
}

impl GpuModel {
    /// Run `tokens` at positions `pos..pos + tokens.len()` (KV rows written for all) in
    /// one submit and return each position's logits, row-major `[token][vocab]`: row `i`
    /// equals what [`GpuModel::decode_with_logits`] of `tokens[i]` at `pos + i` returns,
    /// bit for bit.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn verify_logits(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>> {
        let bytes = self.submit_verify(tokens, pos, Rows::Logits)?;
        let staging = self.verify_staging(Rows::Logits);
        let out = self.ctx.read_staging(staging, bytes)?;
        Ok(bytemuck::pod_collect_to_vec(&out))
    }

    /// [`GpuModel::verify_logits`] reading back only each position's greedy next token
    /// (decode's argmax: the lowest index on ties, never NaN).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn verify_argmax(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<u32>> {
        let bytes = self.submit_verify(tokens, pos, Rows::Argmax)?;
        let staging = self.verify_staging(Rows::Argmax);
        let out = self.ctx.read_staging(staging, bytes)?;
        Ok(bytemuck::pod_collect_to_vec(&out))
    }

    /// [`GpuModel::verify_logits`], awaiting the readback (the browser).
    pub async fn verify_logits_async(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>> {
        let bytes = self.submit_verify(tokens, pos, Rows::Logits)?;
        let staging = self.verify_staging(Rows::Logits);
        let out = self.ctx.read_staging_async(staging, bytes).await?;
        Ok(bytemuck::pod_collect_to_vec(&out))
    }

    /// [`GpuModel::verify_argmax`], awaiting the readback (the browser).
    pub async fn verify_argmax_async(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<u32>> {
        let bytes = self.submit_verify(tokens, pos, Rows::Argmax)?;
        let staging = self.verify_staging(Rows::Argmax);
        let out = self.ctx.read_staging_async(staging, bytes).await?;
        Ok(bytemuck::pod_collect_to_vec(&out))
    }

    /// Check a verification of `tokens` at `pos..`: some tokens, at most
    /// [`VERIFY_MAX_TOKENS`], each in the vocabulary, all positions in the context.
    fn check_verify(&self, tokens: &[u32], pos: usize) -> Result<()> {
        let n = tokens.len();
        if n == 0 || n > VERIFY_MAX_TOKENS {
            return Err(Error::InvalidArgument(format!(
                "a verification step of {n} tokens (1 to {VERIFY_MAX_TOKENS})"
            )));
        }
        if let Some(t) = tokens
            .iter()
            .find(|t| **t as usize >= self.config.vocab_size)
        {
            return Err(Error::InvalidArgument(format!(
                "token {t} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        if pos + n > self.context {
            return Err(Error::ContextTooLong {
                position: pos.max(self.context),
                context: self.context,
            });
        }
        Ok(())
    }

    /// Encode and submit the verification of `tokens` at `pos..`, `rows` copied to their
    /// staging buffer; returns the bytes to read back from it.
    fn submit_verify(&mut self, tokens: &[u32], pos: usize, rows: Rows) -> Result<u64> {
        self.check_verify(tokens, pos)?;
        let row = match rows {
            Rows::Argmax => 4,
            Rows::Logits => 4 * self.config.vocab_size as u64,
        };
        self.ensure_verify_buffers(rows);
        let steps: Vec<StepUniform> = (pos..)
            .zip(tokens)
            .map(|(p, &token)| StepUniform {
                token,
                pos: p as u32,
                pad: [0; 2],
            })
            .collect();
        let v = self.verify.as_ref().expect("made above");
        self.ctx
            .queue
            .write_buffer(&v.steps, 0, bytemuck::cast_slice(&steps));
        let staging = self.verify_staging(rows);
        let (source, source_bytes) = match rows {
            Rows::Argmax => (&self.acts.argmax, 4),
            Rows::Logits => (&self.acts.logits, row),
        };
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        for i in 0..tokens.len() {
            let at = i as u64;
            enc.copy_buffer_to_buffer(&v.steps, at * STEP_BYTES, &self.step, 0, STEP_BYTES);
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("verify step"),
                    timestamp_writes: None,
                });
                for d in &self.dispatches {
                    d.encode(&self.attention, pos + i, &mut pass);
                }
            }
            enc.copy_buffer_to_buffer(source, 0, staging, at * row, source_bytes);
        }
        self.submit(enc.finish());
        Ok(row * tokens.len() as u64)
    }

    /// Make the verification buffers `rows` needs, once.
    fn ensure_verify_buffers(&mut self, rows: Rows) {
        let device = &self.ctx.device;
        let buffer = |label, bytes, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: padded(bytes),
                usage,
                mapped_at_creation: false,
            })
        };
        let max = VERIFY_MAX_TOKENS as u64;
        let read = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        let v = self.verify.get_or_insert_with(|| VerifyBuffers {
            steps: buffer(
                "verify steps",
                max * STEP_BYTES,
                wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            ),
            argmax: buffer("verify argmax", 4 * max, read),
            logits: None,
        });
        if rows == Rows::Logits && v.logits.is_none() {
            let bytes = 4 * max * self.config.vocab_size as u64;
            v.logits = Some(buffer("verify logits", bytes, read));
        }
    }

    /// The staging buffer of `rows` (made by [`GpuModel::ensure_verify_buffers`]).
    fn verify_staging(&self, rows: Rows) -> &wgpu::Buffer {
        let v = self.verify.as_ref().expect("verify buffers made");
        match rows {
            Rows::Argmax => &v.argmax,
            Rows::Logits => v.logits.as_ref().expect("verify logits made"),
        }
    }
}
