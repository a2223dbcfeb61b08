//! A sampled decode step in two submits: the layers and head first (Readback::Forward),
//! then, once the host has the sampler's logit adjustments and allowed-token mask (the
//! mask of a constrained request is computed on the CPU while the GPU runs the layers),
//! the selection: adjustments in place, the masked argmax, the masked top-k and the
//! normaliser when asked for, and their readback. Unconstrained steps submit both halves at once. The mask flag is cleared after the
//! selection's submit, so steps that do not upload a mask (greedy, pipelined, prompt)
//! see every token.

use super::step::StepKernel;
use super::{GpuModel, Readback, Sampled};
use crate::error::Result;
use crate::gpu::kernels::argmax::mask_words;
use crate::gpu::kernels::logsumexp::LogSumExp;
use crate::gpu::kernels::topk::{parse_result, TopK};
use crate::sampler::Sampler;

/// A sampled step's readback: the adjusted candidates, best first (one, the argmax, for
/// greedy choices), and ln Σ exp of all adjusted logits when asked for.
pub type Candidates = (Vec<(u32, f32)>, Option<f32>);

impl GpuModel {
    /// [`GpuModel::decode`] for sampling: the `sampler`'s adjustments
    /// ([`Sampler::adjustments`]) applied to the logits in place, then among the tokens
    /// its mask allows ([`Sampler::mask`]) the 64 most likely next tokens with their
    /// adjusted logits, best first (ties to the lower id), or only the best when that is
    /// all the sampler needs; and ln Σ exp of all adjusted logits when it wants it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn decode_topk(
        &mut self,
        token: u32,
        pos: usize,
        sampler: &mut Sampler,
    ) -> Result<Candidates> {
        // Natively the async readback polls the device: it is ready at once.
        let candidates = pollster::block_on(self.decode_topk_async(token, pos, sampler))?;
        self.ctx.check_errors()?;
        Ok(candidates)
    }

    /// [`GpuModel::decode_topk`], awaiting the readback.
    pub async fn decode_topk_async(
        &mut self,
        token: u32,
        pos: usize,
        sampler: &mut Sampler,
    ) -> Result<Candidates> {
        let s = self.submit_sampled(token, pos, sampler)?;
        if !s.topk {
            let staging = &self.token_staging[pos % 2];
            let b = self.ctx.read_staging_async(staging, 4).await?;
            return Ok((
                vec![(u32::from_le_bytes([b[0], b[1], b[2], b[3]]), 0.0)],
                None,
            ));
        }
        let bytes = self
            .ctx
            .read_staging_async(&self.topk_staging, Self::topk_readback_bytes())
            .await?;
        let (topk, rest) = bytes.split_at(TopK::result_bytes() as usize);
        let log_z = s
            .log_z
            .then(|| f32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]));
        Ok((parse_result(topk), log_z))
    }

    /// Bytes of the top-k staging buffer: the candidates, then the normaliser.
    pub(super) fn topk_readback_bytes() -> u64 {
        TopK::result_bytes() + LogSumExp::result_bytes()
    }

    /// Submit the layers, then (with the sampler's adjustments and mask uploaded) the
    /// selection.
    fn submit_sampled(&mut self, token: u32, pos: usize, sampler: &mut Sampler) -> Result<Sampled> {
        self.write_step(token, pos)?;
        let mut forward = Some(self.encode_commands(pos, Readback::Forward));
        let constrained = sampler.constraint().is_some();
        if constrained {
            // The GPU runs the layers while the host computes the grammar's mask.
            self.submit(forward.take().expect("encoded"));
        }
        let adjust = sampler.adjustments(self.config.vocab_size)?;
        let adjust_groups = self.adjust.upload(&self.ctx, &self.acts.logits, &adjust)?;
        let (log_z, topk) = (
            sampler.wants_log_z(),
            sampler.candidates_needed() != Some(1) || sampler.wants_log_z(),
        );
        let masked = match sampler.mask()? {
            Some(bits) => {
                self.upload_mask(bits);
                true
            }
            None => false,
        };
        let sampled = Sampled {
            adjust_groups,
            log_z,
            topk,
            masked,
        };
        let select = self.encode_select(pos, sampled);
        match forward {
            // Unconstrained: one submit of both halves.
            Some(forward) => self.submit_all([forward, select]),
            None => self.submit(select),
        };
        if masked {
            self.ctx
                .queue
                .write_buffer(&self.acts.mask, 0, bytemuck::bytes_of(&0u32));
        }
        Ok(sampled)
    }

    /// Write the mask buffer: the flag, then `bits` (cut or padded with zeros to the
    /// model's vocabulary: ids past the tokenizer's are never allowed).
    fn upload_mask(&self, bits: &[u32]) {
        let words = mask_words(self.config.vocab_size);
        let mut data = vec![0u32; words];
        data[0] = 1;
        let n = bits.len().min(words - 1);
        data[1..=n].copy_from_slice(&bits[..n]);
        // Bits past the vocabulary in the last word stay as given: argmax and top-k never
        // read tokens at or past N.
        self.ctx
            .queue
            .write_buffer(&self.acts.mask, 0, bytemuck::cast_slice(&data));
    }

    /// The selection at `pos`: adjustments, argmax, top-k and normaliser as `s` asks, and
    /// the copies to the staging buffers.
    fn encode_select(&self, pos: usize, s: Sampled) -> wgpu::CommandBuffer {
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("decode selection"),
                timestamp_writes: None,
            });
            self.adjust.encode(&mut pass, s.adjust_groups);
            if s.adjust_groups > 0 || s.masked {
                // The head's fused argmax (GPUs) saw the logits before the adjustments
                // and the mask before its upload: the argmax over the logits.
                self.argmax_logits.encode(&mut pass);
            } else {
                let argmax = self
                    .dispatches
                    .iter()
                    .filter(|d| d.kernel == StepKernel::Argmax);
                argmax.for_each(|d| d.encode(&self.attention, pos, &mut pass));
            }
            if s.topk {
                self.topk.iter().for_each(|d| d.encode(&mut pass));
                if s.log_z {
                    self.log_z.encode(&mut pass);
                }
            }
        }
        let staging = &self.token_staging[pos % 2];
        enc.copy_buffer_to_buffer(&self.acts.argmax, 0, staging, 0, 4);
        if s.topk {
            let bytes = TopK::result_bytes();
            enc.copy_buffer_to_buffer(&self.topk_result, 0, &self.topk_staging, 0, bytes);
            if s.log_z {
                let (staging, n) = (&self.topk_staging, LogSumExp::result_bytes());
                enc.copy_buffer_to_buffer(&self.log_z_result, 0, staging, bytes, n);
            }
        }
        enc.finish()
    }
}
