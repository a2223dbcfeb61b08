//! Decode with the host out of the token loop: greedy and sampled steps pipelined one step
//! ahead (the embedding of step n + 1 reads step n's argmax, or its token drawn on the GPU
//! from the top-k with the host's seeded number, so step n + 1 is submitted before step
//! n's token is read back), natively in a loop and in the browser one awaited step at a
//! time ([`GpuModel::decode_ahead_async`], [`GpuModel::sampled_ahead_async`]); and a bound on prompt steps and prefill chunks
//! in flight (blocking natively, awaited in the browser).

use super::{GpuModel, Readback};
use crate::error::{Error, Result};
use crate::gpu::kernels::embed_q4::TOKEN_ON_GPU;
use crate::gpu::kernels::sample_draw::DrawUniform;
use crate::sampler::GpuDraws;

/// Most prompt steps ([`GpuModel::feed`]) and prefill chunks submitted and not known
/// done: beyond, the host waits for the oldest (natively) or awaits the queue's work
/// (the browser: [`GpuModel::feed_all_async`]).
pub const MAX_IN_FLIGHT: usize = 8;

/// A step submitted ahead of its input's readback: position `pos`, its token the GPU's
/// choice of the step before (argmax or draw), which the host read as `token`; valid
/// while nothing else was submitted (`submits` then), no KV row was written, and the
/// host asks for the same choice: greedy (`draws` `None`), or drawn with the same
/// settings and the same next number of the generator (`draws` as the host's sampler
/// holds them once it took the previous step's number).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Ahead {
    pos: usize,
    token: u32,
    submits: u64,
    draws: Option<GpuDraws>,
}

impl GpuModel {
    /// Greedy decoding from `first` at position `start`, pipelined one step ahead: each
    /// next step is submitted (its token the previous step's argmax, on the GPU) before the
    /// previous token is read back. `on_token(token, position)` gets each token with the
    /// cache length after the step that made it and says whether to go on (feed the
    /// token). Returns the steps kept (tokens read): a step submitted ahead of a token
    /// that stops is discarded (its cache position is overwritten by the next use). The
    /// same tokens as [`GpuModel::decode`] step by step.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn greedy_pipelined(
        &mut self,
        first: u32,
        start: usize,
        on_token: impl FnMut(u32, usize) -> Result<bool>,
    ) -> Result<usize> {
        self.pipelined(first, start, None, on_token)
    }

    /// [`GpuModel::greedy_pipelined`] for sampling: each step's token is drawn on the GPU
    /// from its top-k candidates (shaders/sample_draw.wgsl) with the next number of
    /// `draws`' generator, uploaded before the step is submitted, and the next step's
    /// embedding reads it there. The same tokens as [`GpuModel::decode_topk`] step by step
    /// with the sampler `draws` came from ([`crate::sampler::Sampler::gpu_draws`]), except
    /// where f32 rounding moves a draw across a boundary between two tokens.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn sampled_pipelined(
        &mut self,
        first: u32,
        start: usize,
        draws: &mut GpuDraws,
        on_token: impl FnMut(u32, usize) -> Result<bool>,
    ) -> Result<usize> {
        self.pipelined(first, start, Some(draws), on_token)
    }

    /// Decoding pipelined one step ahead: greedy without `draws`, else drawn on the GPU.
    #[cfg(not(target_arch = "wasm32"))]
    fn pipelined(
        &mut self,
        first: u32,
        start: usize,
        mut draws: Option<&mut GpuDraws>,
        mut on_token: impl FnMut(u32, usize) -> Result<bool>,
    ) -> Result<usize> {
        self.write_step(first, start)?;
        let mut pending = self.submit_pipelined(start, draws.as_deref_mut());
        let mut pos = start;
        loop {
            let ahead = match pos + 1 < self.context {
                true => {
                    self.write_step_uniform(TOKEN_ON_GPU, pos + 1)?;
                    Some(self.submit_pipelined(pos + 1, draws.as_deref_mut()))
                }
                false => None,
            };
            let bytes = self
                .ctx
                .read_staging_after(&self.token_staging[pos % 2], 4, pending)?;
            let token = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            if ahead.is_some() {
                self.overlapped_reads.set(self.overlapped_reads.get() + 1);
            }
            if token as usize >= self.config.vocab_size {
                return Err(Error::InvalidArgument(
                    "the logits are all NaN: no token to sample".into(),
                ));
            }
            if !on_token(token, pos + 1)? {
                return Ok(pos + 1 - start);
            }
            pending = ahead.ok_or(Error::ContextTooLong {
                position: self.context,
                context: self.context,
            })?;
            pos += 1;
        }
    }

    /// Submit the step at `pos` (its step uniform written): greedy, or with `draws`' next
    /// draw uploaded and drawn on the GPU.
    fn submit_pipelined(&self, pos: usize, draws: Option<&mut GpuDraws>) -> wgpu::SubmissionIndex {
        let readback = match draws {
            Some(d) => {
                let r = d.next_uniform();
                let params = DrawUniform::new(&d.config, r);
                let bytes = bytemuck::bytes_of(&params);
                self.ctx.queue.write_buffer(&self.draw_params, 0, bytes);
                Readback::Drawn
            }
            None => Readback::Argmax,
        };
        self.submit(self.encode_commands(pos, readback))
    }

    /// A [`Readback::Drawn`] step's selection, after the head: the top-k, then the draw
    /// (into the argmax buffer: the next step's embedding and the readback read it).
    pub(super) fn encode_draw(&self, pass: &mut wgpu::ComputePass) {
        self.topk.iter().for_each(|d| d.encode(pass));
        self.draw.encode(pass);
    }

    /// [`GpuModel::decode_async`] pipelined one step ahead, for a host that awaits each
    /// token (the browser): unless it was submitted ahead already (the same `token` at
    /// `pos`, nothing submitted or written since), the step is submitted; then the next
    /// step, its token this step's argmax on the GPU; then this step's token is awaited,
    /// so the GPU works on the next step through the readback, the host's turn and its
    /// next call. A host that goes on differently (another token, a prompt, a sampler, a
    /// snapshot restore) makes the step ahead stale: it is submitted again and the stale
    /// one's cache row is overwritten. The same tokens as [`GpuModel::decode_async`].
    pub async fn decode_ahead_async(&mut self, token: u32, pos: usize) -> Result<u32> {
        self.ahead_async(token, pos, None).await
    }

    /// [`GpuModel::decode_ahead_async`] for sampling: this step's token is drawn on the
    /// GPU from its top-k with the next number of `draws` (which advance by that one
    /// number, as the sampler's generator would: [`crate::sampler::Sampler::resume_after`]
    /// takes them back), and the step ahead's with the number after, so a host that
    /// calls again with the draws it got back finds it submitted. Draws that differ
    /// (another sampler, seed or generator state) make the step ahead stale. The same
    /// tokens as [`GpuModel::decode_topk_async`] with the sampler `draws` came from
    /// ([`crate::sampler::Sampler::gpu_draws`]) and its host draw, except where f32
    /// rounding moves a draw across a boundary between two tokens.
    pub async fn sampled_ahead_async(
        &mut self,
        token: u32,
        pos: usize,
        draws: &mut GpuDraws,
    ) -> Result<u32> {
        self.ahead_async(token, pos, Some(draws)).await
    }

    /// The awaited step pipelined one ahead: greedy without `draws`, else drawn on the GPU.
    async fn ahead_async(
        &mut self,
        token: u32,
        pos: usize,
        mut draws: Option<&mut GpuDraws>,
    ) -> Result<u32> {
        let ahead = self.ahead.take();
        let wanted = Ahead {
            pos,
            token,
            submits: self.submits.get(),
            draws: draws.as_deref().cloned(),
        };
        if ahead.as_ref() == Some(&wanted) {
            // Submitted ahead, drawn with this number: the draws go past it.
            if let Some(d) = draws.as_deref_mut() {
                d.next_uniform();
            }
        } else {
            self.write_step(token, pos)?;
            self.submit_pipelined(pos, draws.as_deref_mut());
        }
        // The draws as the host will hold them at the next step: the step ahead draws
        // with a copy, so they advance by this step's number only.
        let following = draws.as_deref().cloned();
        let next = pos + 1 < self.context;
        if next {
            self.write_step_uniform(TOKEN_ON_GPU, pos + 1)?;
            self.submit_pipelined(pos + 1, following.clone().as_mut());
        }
        let staging = &self.token_staging[pos % 2];
        let bytes = self.ctx.read_staging_async(staging, 4).await?;
        let read = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if read as usize >= self.config.vocab_size {
            return Err(Error::InvalidArgument(
                "the logits are all NaN: no token to sample".into(),
            ));
        }
        if next {
            self.overlapped_reads.set(self.overlapped_reads.get() + 1);
            self.ahead.set(Some(Ahead {
                pos: pos + 1,
                token: read,
                submits: self.submits.get(),
                draws: following,
            }));
        }
        Ok(read)
    }

    /// Token reads of [`GpuModel::greedy_pipelined`], [`GpuModel::sampled_pipelined`],
    /// [`GpuModel::decode_ahead_async`] and [`GpuModel::sampled_ahead_async`] made while
    /// the next step was already submitted (all but those at the end of the context).
    pub fn overlapped_reads(&self) -> u64 {
        self.overlapped_reads.get()
    }

    /// [`GpuModel::feed`] for the browser, which cannot block: past [`MAX_IN_FLIGHT`]
    /// queued prompt steps it awaits the queue's submitted work.
    pub async fn feed_async(&mut self, token: u32, pos: usize) -> Result<()> {
        let index = self.submit_step(token, pos, Readback::Nothing)?;
        self.bound_in_flight_async(index).await
    }

    /// Prompt steps and prefill chunks submitted and not yet known done (at most
    /// [`MAX_IN_FLIGHT`] after any feed).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// [`GpuModel::bound_in_flight`] that awaits (`onSubmittedWorkDone` in the browser):
    /// past [`MAX_IN_FLIGHT`], everything submitted so far is awaited.
    pub(super) async fn bound_in_flight_async(
        &mut self,
        index: wgpu::SubmissionIndex,
    ) -> Result<()> {
        self.in_flight.push_back(index);
        if self.in_flight.len() > MAX_IN_FLIGHT {
            let (tx, rx) = crate::gpu::oneshot::channel();
            self.ctx.queue.on_submitted_work_done(move || tx.send(()));
            #[cfg(not(target_arch = "wasm32"))]
            self.ctx
                .device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
            rx.await
                .ok_or_else(|| Error::Gpu("the queue's work-done callback never ran".into()))?;
            self.in_flight.clear();
        }
        Ok(())
    }

    /// Note the prompt step `index` in flight; with more than [`MAX_IN_FLIGHT`], wait for
    /// the oldest (natively).
    pub(super) fn bound_in_flight(&mut self, index: wgpu::SubmissionIndex) -> Result<()> {
        self.in_flight.push_back(index);
        while self.in_flight.len() > MAX_IN_FLIGHT {
            let oldest = self.in_flight.pop_front().expect("more than the bound");
            #[cfg(not(target_arch = "wasm32"))]
            self.ctx.wait_for(oldest)?;
            // Nothing may block in the browser: dropped (the awaited feeds bound the queue,
            // `bound_in_flight_async`).
            #[cfg(target_arch = "wasm32")]
            let _ = oldest;
        }
        Ok(())
    }
}
