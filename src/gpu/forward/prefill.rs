//! Batched prefill: the prompt runs through the model in chunks of up to [`CHUNK`] tokens,
//! each chunk one submit: embed → per layer [norm + QKV GEMM, q/k-norm + RoPE + KV write,
//! causal flash attention, O GEMM + residual, norm + gate/up GEMM + SwiGLU, down GEMM +
//! residual]. The chunk's K/V land in the same f16 cache decode reads, so decoding
//! continues where prefill stopped. The last position's logits come from decode's own
//! final norm + head GEMV (its hidden row is copied into decode's residual buffer).
//!
//! Scratch is bounded by the chunk and allocated at load; [`scratch_sizes`] lists it for
//! the memory planner.

use super::designs::{GemmDispatch, GemmQ4};
use super::step::ByFormat;
use super::{Activations, GpuModel, StepKernel, StepMatrices, DISPATCHES_OUTSIDE_LAYERS};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::gpu::buffers::padded;
use crate::gpu::kernels::common::attention_prefill::AttentionPrefill;
use crate::gpu::kernels::common::gemm::{ChunkUniform, MAX_LANE_TOKENS};
use crate::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec};
use crate::gpu::kernels::common::q4_codes::Codes;
use crate::gpu::kernels::common::rope_kv::KvBuffers;
use crate::gpu::kernels::embed_prefill::EmbedPrefill;
use crate::gpu::kernels::embed_q4::{split_of, table_bindings};
use crate::gpu::kernels::rope_kv_prefill::RopeKvPrefill;
use crate::gpu::kernels::soft::gemm_q4_lanes::{records_bytes, tokens_for_limit};
use crate::gpu::kernels::{grid, Dispatch};
use crate::gpu::kv_cache::KvCache;
use crate::gpu::profile::PREFILL_CHUNK;
use crate::gpu::profiled::ProfiledContext;

/// Positions batched prefill reaches: its attention is tested against the oracle up to
/// 32,768 keys per query (tests/gpu_attention_prefill.rs); later prompt tokens go through
/// decode steps (split-K attention).
pub const PREFILL_MAX_POSITIONS: usize = 32_768;

/// Most tokens per prefill chunk (and submit) of any profile: the scratch is sized for it.
pub const CHUNK: usize = PREFILL_CHUNK;

/// Most tokens per chunk for a `context`-position model (what the scratch holds).
fn chunk_len(context: usize) -> usize {
    CHUNK.min(context)
}

/// The prefill scratch buffers of `cfg` at `context`: (label, bytes before padding).
/// Activation rows are rounded up to whole GEMM token tiles ([`GemmQ4::x_rows`]).
pub fn scratch_sizes(cfg: &ModelConfig, context: usize) -> [(&'static str, u64); 7] {
    let c = chunk_len(context).next_multiple_of(MAX_LANE_TOKENS) as u64;
    let f = |n: usize| 4 * c * n as u64;
    [
        ("prefill chunk", 16),
        ("prefill tokens", 4 * c),
        ("prefill x", f(cfg.hidden_size)),
        ("prefill qkv", f(cfg.q_dim() + 2 * cfg.kv_dim())),
        ("prefill q", f(cfg.q_dim())),
        ("prefill attn", f(cfg.q_dim())),
        ("prefill ffn", f(cfg.ffn_size)),
    ]
}

/// Bytes of the row-lanes GEMMs' tile records (CPU adapters, `GemmVariant::RowLanes`)
/// for `cfg` at `context` on a device with a `uniform_limit`-byte uniform binding limit:
/// each layer binds its four GEMMs for a whole chunk.
pub fn lanes_records_bytes(cfg: &ModelConfig, context: usize, uniform_limit: u64) -> u64 {
    let ks = [cfg.hidden_size, cfg.q_dim(), cfg.hidden_size, cfg.ffn_size];
    let per_layer: u64 = ks
        .iter()
        .filter_map(|&k| tokens_for_limit(uniform_limit, k))
        .map(|t| padded(records_bytes(chunk_len(context), t)))
        .sum();
    cfg.n_layers as u64 * per_layer
}

/// A recorded step of a chunk (its grid depends on the chunk's length).
enum Step {
    Embed(Dispatch),
    Gemm(GemmDispatch),
    Rope(Dispatch),
    Attention(Dispatch),
}

/// The kernels of prefill (one per shape, shared by the layers).
struct Kernels {
    embed: EmbedPrefill,
    /// QKV, O, gate/up, down: the profile's design for Q4 matrices, its Q8 design
    /// ([`crate::gpu::profile::Q8Designs`]) for Q8 ones.
    gemms: [ByFormat<GemmQ4>; 4],
    rope: RopeKvPrefill,
    attention: AttentionPrefill,
}

pub(super) struct Prefill {
    kernels: Kernels,
    chunk: wgpu::Buffer,
    tokens: wgpu::Buffer,
    /// The residual stream of the chunk's tokens (chunk × hidden).
    pub(super) x: wgpu::Buffer,
    scratch: Vec<wgpu::Buffer>,
    dispatches: Vec<Step>,
    /// Tokens per chunk.
    len: usize,
}

impl Prefill {
    pub(super) fn new(
        ctx: &ProfiledContext,
        cfg: &ModelConfig,
        context: usize,
        matrices: &StepMatrices,
        kv: &KvCache,
        acts: &Activations,
    ) -> Result<Prefill> {
        let w = matrices.weights;
        let len = ctx.profile.prefill_chunk.clamp(1, chunk_len(context));
        let (h, qd) = (cfg.hidden_size, cfg.q_dim());
        // GEMM `j` (0 QKV, 1 O, 2 gate/up, 3 down) of `spec`'s shape for each format of
        // the layers' matrix `j`.
        let gemm_role = |j: usize, n, k, epilogue, bias, norm: bool| {
            let matrices = w.layers.iter().map(move |l| l.matrices()[j]);
            ByFormat::new(matrices, |format| {
                let spec = GemvSpec {
                    n,
                    k,
                    epilogue,
                    bias,
                    norm_eps: norm.then_some(cfg.rms_eps),
                    add_parts: 0,
                    format,
                    row0: 0,
                };
                GemmQ4::new(ctx, spec)
            })
        };
        let qkv_rows = qd + 2 * cfg.kv_dim();
        let shape = KvCache::shape(cfg, context);
        let f = cfg.ffn_size;
        let split = split_of(&w.embedding_parts(ctx)?)?;
        let k = Kernels {
            embed: EmbedPrefill::new(ctx, h, w.token_embd.format, split),
            gemms: [
                gemm_role(0, qkv_rows, h, Epilogue::Store, cfg.qkv_bias, true)?,
                gemm_role(1, h, qd, Epilogue::AddInto, false, false)?,
                gemm_role(2, f, h, Epilogue::SwiGlu, false, true)?,
                gemm_role(3, h, f, Epilogue::AddInto, false, false)?,
            ],
            rope: RopeKvPrefill::new(ctx, shape, cfg.qk_norm, cfg.rms_eps)?,
            attention: AttentionPrefill::new(ctx, shape)?,
        };
        let mut bufs = Vec::new();
        for (label, bytes) in scratch_sizes(cfg, context) {
            bufs.push(if label == "prefill chunk" {
                ctx.uniform(label, bytes)
            } else {
                ctx.storage(label, bytes)?
            });
        }
        let [chunk, tokens, x, qkv, q, attn, ffn]: [wgpu::Buffer; 7] = bufs
            .try_into()
            .map_err(|_| Error::InvalidArgument("prefill scratch".into()))?;
        // GEMM `i` (0 QKV, 1 output, 2 gate/up, 3 down) of `layer` over matrix `m`.
        let gemm = |layer: usize, i: usize, m, input, norm, bias: Option<&wgpu::Buffer>, out| {
            let kernel = k.gemms[i].of(m);
            let codes = match kernel.variant().reads_texture() {
                true => matrices.codes(m, Some((layer, i))).1,
                false => Codes::Buffer(&m.codes),
            };
            let d = kernel.dispatch(
                ctx,
                &chunk,
                codes,
                &m.qparams,
                input,
                norm,
                bias.unwrap_or(&acts.none),
                out,
                len,
            )?;
            Ok::<_, Error>(Step::Gemm(d))
        };
        let table = table_bindings(&w.embedding_parts(ctx)?);
        let embed = k.embed.dispatch(ctx, (&chunk, &tokens), table, &x, len);
        let mut d = vec![Step::Embed(embed)];
        for (i, l) in w.layers.iter().enumerate() {
            let (q_norm, k_norm) = match &l.qk_norm {
                Some((q, k)) => (q, k),
                None => (&acts.none, &acts.none),
            };
            let cache = KvBuffers {
                k: &kv.k[i],
                v: &kv.v[i],
            };
            d.push(gemm(
                i,
                0,
                &l.qkv,
                &x,
                Some(&l.attn_norm),
                l.qkv_bias.as_ref(),
                &qkv,
            )?);
            let rope = k.rope.dispatch(
                ctx,
                &chunk,
                &qkv,
                q_norm,
                k_norm,
                &acts.inv_freq,
                &q,
                cache,
                len,
            );
            d.push(Step::Rope(rope));
            let attention = k.attention.dispatch(ctx, &chunk, &q, cache, &attn, len);
            d.push(Step::Attention(attention));
            d.push(gemm(i, 1, &l.attn_output, &attn, None, None, &x)?);
            d.push(gemm(i, 2, &l.gate_up, &x, Some(&l.ffn_norm), None, &ffn)?);
            d.push(gemm(i, 3, &l.down, &ffn, None, None, &x)?);
        }
        Ok(Prefill {
            kernels: k,
            chunk,
            tokens,
            x,
            scratch: vec![qkv, q, attn, ffn],
            dispatches: d,
            len,
        })
    }

    /// Encode `step` for a chunk of `count` tokens.
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, step: &Step, count: usize) -> Result<()> {
        let k = &self.kernels;
        match step {
            Step::Embed(d) => d.encode_grid(pass, grid(k.embed.workgroups(count))),
            Step::Gemm(d) => d.encode(pass, count)?,
            Step::Rope(d) => d.encode_grid(pass, grid(k.rope.workgroups(count))),
            Step::Attention(d) => d.encode_grid(pass, k.attention.grid(count)),
        }
        Ok(())
    }

    pub(super) fn destroy(&self) {
        for b in [&self.chunk, &self.tokens, &self.x]
            .into_iter()
            .chain(&self.scratch)
        {
            b.destroy();
        }
    }
}

impl GpuModel {
    /// Tokens per prefill chunk (one submit each).
    pub fn prefill_chunk_len(&self) -> usize {
        self.prefill.len
    }

    /// Whether batched prefill beats token-by-token steps here: where the profile says
    /// so, and in a lanes-GEMM profile only while every GEMM runs that design (a shape
    /// that fell back to workgroup tiles leans on barriers, which CPU adapters run far
    /// slower than decode's GEMV: docs/ARCHITECTURE.md).
    pub fn prefill_pays(&self) -> bool {
        let profile = &self.ctx.profile;
        let gemms = &self.prefill.kernels.gemms;
        profile.batched_prefill
            && (!profile.gemm.is_lanes()
                || gemms
                    .iter()
                    .flat_map(ByFormat::all)
                    .all(|g| g.variant().is_lanes()))
    }

    /// Run prompt tokens at positions `start..` whose successors are not needed: batched
    /// prefill where it pays and up to [`PREFILL_MAX_POSITIONS`], token-by-token decode
    /// steps for the rest.
    pub fn feed_all(&mut self, tokens: &[u32], start: usize) -> Result<()> {
        let batched = self.batched_len(tokens.len(), start);
        if batched > 0 {
            self.prefill_feed(&tokens[..batched], start)?;
        }
        (start + batched..)
            .zip(&tokens[batched..])
            .try_for_each(|(pos, &t)| self.feed(t, pos))
    }

    /// [`GpuModel::feed_all`] for the browser, which cannot block: past `MAX_IN_FLIGHT`
    /// queued chunks or prompt steps it awaits the queue's submitted work.
    pub async fn feed_all_async(&mut self, tokens: &[u32], start: usize) -> Result<()> {
        let batched = self.batched_len(tokens.len(), start);
        if batched > 0 {
            self.prefill_feed_async(&tokens[..batched], start).await?;
        }
        for (pos, &t) in (start + batched..).zip(&tokens[batched..]) {
            self.feed_async(t, pos).await?;
        }
        Ok(())
    }

    /// How many of `n` prompt tokens at `start..` go through batched prefill (the rest
    /// through decode steps).
    fn batched_len(&self, n: usize, start: usize) -> usize {
        match self.prefill_pays() {
            true => n.min(PREFILL_MAX_POSITIONS.saturating_sub(start)),
            false => 0,
        }
    }

    /// Check a prefill of `tokens` at positions `start..`.
    pub(super) fn check_prefill(&self, tokens: &[u32], start: usize) -> Result<()> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("prefill of no tokens".into()));
        }
        self.check_in_vocabulary(tokens)?;
        if start + tokens.len() > PREFILL_MAX_POSITIONS {
            return Err(Error::InvalidArgument(format!(
                "batched prefill reaches position {} (at most {PREFILL_MAX_POSITIONS}; \
                 decode steps take the rest)",
                start + tokens.len()
            )));
        }
        if start + tokens.len() > self.context {
            return Err(Error::ContextTooLong {
                position: self.context.max(start),
                context: self.context,
            });
        }
        Ok(())
    }

    /// Encode one chunk (`tokens.len() ≤ chunk`, starting at position `start`) after
    /// writing its uniform and token ids.
    pub(super) fn encode_chunk(
        &self,
        tokens: &[u32],
        start: usize,
    ) -> Result<wgpu::CommandEncoder> {
        let p = &self.prefill;
        let uniform = ChunkUniform {
            start: start as u32,
            count: tokens.len() as u32,
            pad: [0; 2],
        };
        let queue = &self.ctx.queue;
        queue.write_buffer(&p.chunk, 0, bytemuck::bytes_of(&uniform));
        queue.write_buffer(&p.tokens, 0, bytemuck::cast_slice(tokens));
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("prefill chunk"),
                timestamp_writes: None,
            });
            for step in &p.dispatches {
                p.encode(&mut pass, step, tokens.len())?;
            }
        }
        Ok(enc)
    }

    /// Copy hidden row `row` of the chunk into decode's residual buffer and run decode's
    /// final norm + head (+ argmax), copying the logits and the argmax to the staging
    /// buffers.
    fn encode_head(&self, enc: &mut wgpu::CommandEncoder, row: usize) {
        let bytes = 4 * self.config.hidden_size as u64;
        let x = &self.prefill.x;
        enc.copy_buffer_to_buffer(x, row as u64 * bytes, &self.acts.h, 0, bytes);
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            // Decode's step ends with the final norm + head GEMV and the argmax.
            let n = self.dispatches.len();
            for d in &self.dispatches[n - (DISPATCHES_OUTSIDE_LAYERS - 1)..] {
                debug_assert!(matches!(d.kernel, StepKernel::Head | StepKernel::Argmax));
                // Neither is attention: the position does not matter.
                d.encode(&self.attention, 0, &mut pass);
            }
        }
        enc.copy_buffer_to_buffer(&self.acts.argmax, 0, &self.token_staging[0], 0, 4);
        let logits = self.logits_staging.size();
        enc.copy_buffer_to_buffer(&self.acts.logits, 0, &self.logits_staging, 0, logits);
    }

    /// Run `tokens` at positions `start..` through the model in chunks, filling the KV
    /// cache, without reading anything back (the host waits only to keep at most
    /// `MAX_IN_FLIGHT` chunks queued). Decoding continues at position
    /// `start + tokens.len()`.
    pub fn prefill_feed(&mut self, tokens: &[u32], start: usize) -> Result<()> {
        self.check_prefill(tokens, start)?;
        for (i, part) in tokens.chunks(self.prefill.len).enumerate() {
            let index = self.submit_chunk(part, start + i * self.prefill.len)?;
            self.bound_in_flight(index)?;
        }
        Ok(())
    }

    /// [`GpuModel::prefill_feed`] that awaits instead of blocking (the browser).
    async fn prefill_feed_async(&mut self, tokens: &[u32], start: usize) -> Result<()> {
        self.check_prefill(tokens, start)?;
        for (i, part) in tokens.chunks(self.prefill.len).enumerate() {
            let index = self.submit_chunk(part, start + i * self.prefill.len)?;
            self.bound_in_flight_async(index).await?;
        }
        Ok(())
    }

    /// Encode and submit the chunk of `tokens` at positions `start..`.
    fn submit_chunk(&mut self, tokens: &[u32], start: usize) -> Result<wgpu::SubmissionIndex> {
        let enc = self.encode_chunk(tokens, start)?;
        Ok(self.submit(enc.finish()))
    }

    /// [`GpuModel::prefill_feed`], then the logits of the last position (awaited: the
    /// browser's prefill, its chunks in flight bounded as [`GpuModel::feed_all_async`]'s).
    pub async fn prefill_async(&mut self, tokens: &[u32], start: usize) -> Result<Vec<f32>> {
        self.prefill_feed_async(tokens, start).await?;
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        self.encode_head(&mut enc, (tokens.len() - 1) % self.prefill.len);
        self.ctx.queue.submit([enc.finish()]);
        self.submits.set(self.submits.get() + 1);
        let bytes = self
            .ctx
            .read_staging_async(&self.logits_staging, self.logits_staging.size())
            .await?;
        Ok(bytemuck::pod_collect_to_vec(
            &bytes[..4 * self.config.vocab_size],
        ))
    }

    /// [`GpuModel::prefill_feed`], then the logits of the last position (blocking).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn prefill(&mut self, tokens: &[u32], start: usize) -> Result<Vec<f32>> {
        self.prefill_feed(tokens, start)?;
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        self.encode_head(&mut enc, (tokens.len() - 1) % self.prefill.len);
        self.ctx.queue.submit([enc.finish()]);
        self.submits.set(self.submits.get() + 1);
        let vocab = self.config.vocab_size as u64;
        let bytes = self.ctx.read_staging(&self.logits_staging, 4 * vocab)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Prefill that returns the logits of every position (tests and debugging: one head
    /// GEMV and readback per token).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn prefill_all_logits(&mut self, tokens: &[u32], start: usize) -> Result<Vec<Vec<f32>>> {
        self.check_prefill(tokens, start)?;
        let mut out = Vec::with_capacity(tokens.len());
        let vocab = self.config.vocab_size;
        for (i, part) in tokens.chunks(self.prefill.len).enumerate() {
            let enc = self.encode_chunk(part, start + i * self.prefill.len)?;
            self.ctx.queue.submit([enc.finish()]);
            for row in 0..part.len() {
                let mut enc = self.ctx.device.create_command_encoder(&Default::default());
                self.encode_head(&mut enc, row);
                self.ctx.queue.submit([enc.finish()]);
                let bytes = self
                    .ctx
                    .read_staging(&self.logits_staging, 4 * vocab as u64)?;
                out.push(bytemuck::pod_collect_to_vec(&bytes));
            }
        }
        Ok(out)
    }
}
