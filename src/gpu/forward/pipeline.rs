//! Decode with the host out of the token loop: greedy steps pipelined one step ahead (the
//! embedding of step n + 1 reads step n's argmax on the GPU, so step n + 1 is submitted
//! before step n's token is read back), and a bound on prompt steps and prefill chunks in
//! flight (blocking natively, awaited in the browser).

use super::{GpuModel, Readback};
use crate::error::{Error, Result};
#[cfg(not(target_arch = "wasm32"))]
use crate::gpu::kernels::embed_q4::TOKEN_ON_GPU;

/// Most prompt steps ([`GpuModel::feed`]) and prefill chunks submitted and not known
/// done: beyond, the host waits for the oldest (natively) or awaits the queue's work
/// (the browser: [`GpuModel::feed_all_async`]).
pub const MAX_IN_FLIGHT: usize = 8;

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
        mut on_token: impl FnMut(u32, usize) -> Result<bool>,
    ) -> Result<usize> {
        self.write_step(first, start)?;
        let mut pending = self.submit(self.encode_commands(start, Readback::Argmax));
        let mut pos = start;
        loop {
            let ahead = match pos + 1 < self.context {
                true => {
                    self.write_step_uniform(TOKEN_ON_GPU, pos + 1)?;
                    Some(self.submit(self.encode_commands(pos + 1, Readback::Argmax)))
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
            if !on_token(token, pos + 1)? {
                return Ok(pos + 1 - start);
            }
            pending = ahead.ok_or(crate::error::Error::ContextTooLong {
                position: self.context,
                context: self.context,
            })?;
            pos += 1;
        }
    }

    /// Token reads of [`GpuModel::greedy_pipelined`] made while the next step was already
    /// submitted (all but those at the end of the context).
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
            #[cfg(target_arch = "wasm32")]
            drop(oldest);
        }
        Ok(())
    }
}
