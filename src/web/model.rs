//! A model in the browser on either backend: WebGPU (`GpuModel`, awaited steps) or the
//! fast CPU backend in wasm memory (`FastModel` with its KV cache, simd128 kernels).

use crate::cpu::fast::{FastModel, Logits};
use crate::cpu::KvCache;
use crate::engine::{
    choose, cpu_rows_tag, gpu_rows_tag, kv_layout_of, KvLayout, RowKind, Verified,
};
use crate::error::{Error, Result};
use crate::gpu::forward::VERIFY_MAX_TOKENS;
use crate::gpu::kernels::topk::TOPK_MAX;
use crate::gpu::GpuModel;
use crate::sampler::Sampler;
use crate::ModelConfig;

/// A loaded model on the backend that runs it.
pub enum WebModel {
    Gpu(Box<GpuModel>),
    Cpu {
        model: Box<FastModel>,
        cache: KvCache,
    },
}

impl WebModel {
    /// The CPU model with a cache of `context` positions.
    pub fn cpu(model: FastModel, context: usize) -> Result<WebModel> {
        let cache = model.new_cache(context)?;
        Ok(WebModel::Cpu {
            model: Box::new(model),
            cache,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        match self {
            WebModel::Gpu(m) => &m.config,
            WebModel::Cpu { model, .. } => &model.config,
        }
    }

    /// Positions the KV cache holds.
    pub fn context(&self) -> usize {
        match self {
            WebModel::Gpu(m) => m.context,
            WebModel::Cpu { cache, .. } => cache.capacity(),
        }
    }

    /// The GPU device, on WebGPU.
    pub fn gpu_context(&self) -> Option<&crate::gpu::ProfiledContext> {
        match self {
            WebModel::Gpu(m) => Some(m.gpu_context()),
            WebModel::Cpu { .. } => None,
        }
    }

    /// Token reads made with the next step already submitted (pipelined greedy and plain
    /// sampled decode on WebGPU; 0 on the CPU backend).
    pub fn overlapped_reads(&self) -> u64 {
        match self {
            WebModel::Gpu(m) => m.overlapped_reads(),
            WebModel::Cpu { .. } => 0,
        }
    }

    /// `"webgpu"` or `"cpu"` (the JS API's names).
    pub fn backend(&self) -> &'static str {
        match self {
            WebModel::Gpu(_) => "webgpu",
            WebModel::Cpu { .. } => "cpu",
        }
    }

    /// Run prompt tokens at `pos..` whose successors are not needed (on the GPU: batched
    /// prefill where it pays, [`crate::gpu::GpuModel::feed_all_async`], at most
    /// `MAX_IN_FLIGHT` command buffers queued; on the CPU: batched
    /// prefill, [`FastModel::prefill`]).
    pub async fn feed_all(&mut self, tokens: &[u32], pos: usize) -> Result<()> {
        match self {
            WebModel::Gpu(m) => m.feed_all_async(tokens, pos).await,
            WebModel::Cpu { model, cache } => {
                cache.truncate(pos);
                model.prefill(tokens, cache, Logits::None).map(drop)
            }
        }
    }

    /// One decode step at `pos`; the GPU reads back only what `sampler` needs. With
    /// `gpu_draws`, the samplers [`Sampler::gpu_draws`] accepts draw on the GPU, pipelined;
    /// else on the host.
    pub async fn step(
        &mut self,
        token: u32,
        pos: usize,
        sampler: &mut Sampler,
        gpu_draws: bool,
    ) -> Result<u32> {
        let need = sampler.candidates_needed();
        let draws = sampler.gpu_draws(TOPK_MAX).filter(|_| gpu_draws);
        if let (WebModel::Gpu(model), Some(mut draws)) = (&mut *self, draws) {
            // Plain sampling: pipelined, each token drawn on the GPU from its top-k with
            // the sampler's next number (which the sampler then goes past), the next step
            // submitted before this one's readback.
            let drawn = model.sampled_ahead_async(token, pos, &mut draws).await?;
            sampler.resume_after(draws);
            return Ok(drawn);
        }
        match self {
            WebModel::Gpu(model) => match need {
                // Greedy: pipelined, the next step submitted before this one's readback.
                None => model.decode_ahead_async(token, pos).await,
                Some(k) if (1..=TOPK_MAX).contains(&k) => {
                    // The adjustments are applied on the GPU, before its top-k.
                    let (sorted, log_z) = model.decode_topk_async(token, pos, sampler).await?;
                    sampler.sample_sorted(&sorted, log_z)
                }
                Some(_) => sampler.sample_logits(&model.decode_logits_async(token, pos).await?),
            },
            WebModel::Cpu { model, cache } => {
                cache.truncate(pos);
                choose(&model.forward(token, cache)?, need.is_none(), sampler)
            }
        }
    }

    /// Speculative decoding's verification step (`crate::speculate`): run `tokens` (the
    /// token to feed and its drafts) at `pos..` as one step, every position's KV row
    /// written, and return each position's logits, or with `argmax_only` (plain greedy)
    /// on WebGPU only each one's argmax. The rows of rejected drafts are left to be
    /// overwritten ([`WebModel::rewind`]). The CPU backend runs them as one prefill chunk
    /// (as natively, `Engine::verify`: each row's numbers are its decode step's); WebGPU
    /// records decode's step once per token in one submit, one readback
    /// ([`GpuModel::verify_logits_async`]).
    pub async fn verify(
        &mut self,
        tokens: &[u32],
        pos: usize,
        argmax_only: bool,
    ) -> Result<Verified> {
        match self {
            WebModel::Gpu(m) if argmax_only => {
                Ok(Verified::Argmax(m.verify_argmax_async(tokens, pos).await?))
            }
            WebModel::Gpu(m) => Ok(Verified::Logits(m.verify_logits_async(tokens, pos).await?)),
            WebModel::Cpu { model, cache } => {
                if pos + tokens.len() > cache.capacity() {
                    return Err(Error::ContextTooLong {
                        position: pos + tokens.len(),
                        context: cache.capacity(),
                    });
                }
                cache.truncate(pos);
                Ok(Verified::Logits(model.prefill(
                    tokens,
                    cache,
                    Logits::All,
                )?))
            }
        }
    }

    /// Most tokens one [`WebModel::verify`] runs (WebGPU's verification buffers hold
    /// [`VERIFY_MAX_TOKENS`] rows; the CPU backend's chunk has no bound).
    pub fn verify_max(&self) -> usize {
        match self {
            WebModel::Gpu(_) => VERIFY_MAX_TOKENS,
            WebModel::Cpu { .. } => usize::MAX,
        }
    }

    /// The cache holds its first `pos` positions only (after a verification step, the
    /// rejected drafts' rows go: the CPU cache's length; WebGPU's steps name their
    /// positions, so its rows past `pos` are simply overwritten later).
    pub fn rewind(&mut self, pos: usize) {
        if let WebModel::Cpu { cache, .. } = self {
            cache.truncate(pos);
        }
    }

    /// `tokens` as a sequence of their own from position 0: each one's final hidden
    /// state after the output norm (`crate::embed`), the cache's conversation (its first
    /// `held` positions) left as it was: the CPU backend runs them in a cache of their
    /// own; on WebGPU the rows they overwrite are read back first and written back after
    /// (as natively, `Engine::hidden_states`).
    pub async fn hidden_states(&mut self, tokens: &[u32], held: usize) -> Result<Vec<f32>> {
        crate::embed::check_tokens(tokens, self.context())?;
        match self {
            WebModel::Cpu { model, .. } => model.hidden_states(tokens),
            WebModel::Gpu(m) => {
                let kept = tokens.len().min(held);
                let saved = match kept {
                    0 => Vec::new(),
                    _ => m.read_kv_async(0, kept).await?,
                };
                let rows = m.hidden_states_async(tokens, 0).await;
                m.with_kv_put_back(kept, &saved, rows)
            }
        }
    }

    /// How this backend stores its KV rows (a session snapshot's layout).
    pub fn kv_layout(&self) -> KvLayout {
        let rows = match self {
            WebModel::Gpu(_) => RowKind::F16Heads,
            WebModel::Cpu { .. } => RowKind::F32,
        };
        kv_layout_of(self.config(), rows)
    }

    /// Where this backend's rows are valid (a snapshot's `backend`): the GPU profile on
    /// its adapter, or the CPU backend's precision.
    pub fn kv_rows_tag(&self) -> String {
        match self {
            WebModel::Gpu(m) => gpu_rows_tag(m.gpu_context()),
            WebModel::Cpu { model, .. } => cpu_rows_tag(model.precision()),
        }
    }

    /// The KV rows of positions `start..start + count` (`held`: the positions the
    /// cache holds), in [`WebModel::kv_layout`]'s order.
    pub async fn read_kv(&self, start: usize, count: usize, held: usize) -> Result<Vec<u8>> {
        let cpu_held = match self {
            WebModel::Cpu { cache, .. } => cache.len(),
            WebModel::Gpu(_) => held,
        };
        if start + count > held.min(cpu_held) {
            return Err(Error::InvalidArgument(format!(
                "KV rows {start}..{} past the {held} positions held",
                start + count
            )));
        }
        match self {
            WebModel::Gpu(m) => m.read_kv_async(start, count).await,
            WebModel::Cpu { cache, .. } => Ok(cache.rows(start, count)),
        }
    }

    /// Write rows read by [`WebModel::read_kv`] (of this backend) at `start`: the cache
    /// then holds `start + count` positions, as if it had run their tokens.
    pub fn write_kv(&mut self, start: usize, count: usize, rows: &[u8]) -> Result<()> {
        let context = self.context();
        if start + count > context {
            return Err(Error::ContextTooLong {
                position: start + count,
                context,
            });
        }
        match self {
            WebModel::Gpu(m) => m.write_kv(start, count, rows),
            WebModel::Cpu { cache, .. } => {
                cache.truncate(start);
                cache.write_rows(start, count, rows)
            }
        }
    }

    /// Free GPU memory (the CPU model's memory goes with the value).
    pub fn destroy(self) {
        if let WebModel::Gpu(m) = self {
            m.destroy();
        }
    }
}
