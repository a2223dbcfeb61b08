//! The decode step on the GPU. At load: upload the weights, allocate the KV cache and the
//! activations, build every pipeline and bind group, and record the step as a list of
//! dispatches. Per token: write one 16-byte uniform (token, position), encode all
//! dispatches into one command buffer, submit once, read back 4 bytes (the argmax).

use super::code_texture::ModelCodeTextures;
use super::kernels::argmax::mask_words;
use super::kernels::argmax_partials::ArgmaxPartials;
use super::kernels::common::attention::{partials_bytes, AttentionVariant};
use super::kernels::common::rope_kv::rope_inv_freq;
use super::kernels::logit_adjust::LogitAdjustKernel;
use super::kernels::logsumexp::LogSumExp;
use super::kernels::sample_draw::SampleDraw;
use super::kernels::topk::TopK;
use super::kernels::Dispatch;
use super::kv_cache::KvCache;
use super::profile::GPU_MIN_SPLIT_LEN;
use super::profiled::ProfiledContext;
#[cfg(not(target_arch = "wasm32"))]
use super::timing::time_pass;
use super::timing::GpuTimer;
use super::weights::ModelWeights;
use super::StepUniform;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::source::ModelSource;
use crate::quant::WeightFormat;
use designs::Attention;
use std::sync::Arc;

mod bytes;
pub use bytes::q4_bytes;
pub mod designs;
mod hidden;
mod pipeline;
mod prefill;
mod record;
mod release;
mod select;
mod snapshot;
pub use select::Candidates;
mod step;
pub use pipeline::MAX_IN_FLIGHT;
pub use prefill::{
    lanes_records_bytes as prefill_lanes_records_bytes, scratch_sizes as prefill_scratch_sizes,
    CHUNK as PREFILL_CHUNK, PREFILL_MAX_POSITIONS,
};
use record::record_step;
use step::{Kernels, StepDispatch, StepMatrices, DISPATCHES_OUTSIDE_LAYERS};
pub use step::{StepKernel, StepOptions};
mod verify;
pub use verify::VERIFY_MAX_TOKENS;

/// Activation buffers, reused by every layer.
struct Activations {
    /// The residual stream (hidden_size): where the embedding starts it when the layers
    /// keep it in one buffer, and where the last layer leaves it in any case.
    h: wgpu::Buffer,
    /// The other residual buffer (hidden_size): with the output projection folded into
    /// attention, each layer's gate/up GEMV reads one buffer (plus `parts`) and writes the
    /// other.
    h_alt: wgpu::Buffer,
    /// The heads' shares of the output projection (n_heads × hidden_size).
    parts: wgpu::Buffer,
    /// q|k|v projections (q_dim + 2·kv_dim).
    qkv: wgpu::Buffer,
    /// Attention scores scratch (n_heads · context).
    scores: wgpu::Buffer,
    /// Split attention's partial results.
    partials: wgpu::Buffer,
    /// Attention output (q_dim).
    attn: wgpu::Buffer,
    /// SwiGLU output (ffn_size).
    ffn: wgpu::Buffer,
    logits: wgpu::Buffer,
    /// Argmax result: index, value bits (or a sampled step's drawn token and its logit).
    argmax: wgpu::Buffer,
    /// The fused head argmax's per-workgroup bests (GPU profiles; 8 bytes elsewhere).
    head_partials: wgpu::Buffer,
    /// The allowed-token mask argmax and top-k read ([`mask_words`]; word 0 zero: off).
    mask: wgpu::Buffer,
    /// Stand-in for absent optional inputs (bias, q/k norm weights).
    none: wgpu::Buffer,
    inv_freq: wgpu::Buffer,
}

impl Activations {
    fn new(ctx: &ProfiledContext, cfg: &ModelConfig, kernels: &Kernels) -> Result<Activations> {
        let attention = &kernels.attention;
        let head_groups = kernels.argmax_partials.as_ref().map_or(0, |p| p.groups);
        let f = |label: &str, n: usize| ctx.storage(label, 4 * n as u64);
        Ok(Activations {
            h: f("h", cfg.hidden_size)?,
            h_alt: f("h alt", cfg.hidden_size)?,
            parts: f("attention parts", cfg.n_heads * cfg.hidden_size)?,
            qkv: f("qkv", cfg.q_dim() + 2 * cfg.kv_dim())?,
            scores: ctx.storage("scores", attention.scratch_bytes())?,
            // Sized for the shortest split of any adapter (the memory plan's figure).
            partials: ctx.storage(
                "attention partials",
                partials_bytes(attention.shape, GPU_MIN_SPLIT_LEN),
            )?,
            attn: f("attn", cfg.q_dim())?,
            ffn: f("ffn", cfg.ffn_size)?,
            logits: f("logits", cfg.vocab_size)?,
            argmax: f("argmax", 2)?,
            head_partials: ctx.storage(
                "head argmax partials",
                ArgmaxPartials::partials_bytes(head_groups),
            )?,
            mask: f("token mask", mask_words(cfg.vocab_size))?,
            none: f("none", 4)?,
            inv_freq: ctx.storage_init("inv_freq", &rope_inv_freq(cfg.rope_theta, cfg.head_dim))?,
        })
    }
}

/// A model loaded on the GPU, ready to decode.
pub struct GpuModel {
    ctx: Arc<ProfiledContext>,
    pub config: ModelConfig,
    /// Positions the KV cache holds.
    pub context: usize,
    step: wgpu::Buffer,
    acts: Activations,
    /// Kept alive for the bind groups (and for tests that inspect them).
    pub weights: ModelWeights,
    /// How the weights were read (a reload reads them so again; streamed: as stored).
    pub(crate) weight_format: WeightFormat,
    /// The decode GEMVs' codes as textures, where the GEMV variant reads them so.
    code_textures: Option<ModelCodeTextures>,
    pub kv: KvCache,
    /// One decode step, in order.
    dispatches: Vec<StepDispatch>,
    attention: Attention,
    /// Top-k over the logits, appended to a step when the sampler needs candidates.
    topk: [Dispatch; 2],
    topk_result: wgpu::Buffer,
    /// The sampler's logit adjustments, applied before argmax and top-k when it has some.
    adjust: LogitAdjustKernel,
    /// The argmax over the logits, for selections whose logits or mask changed after the
    /// head ran (forward/select.rs).
    argmax_logits: Dispatch,
    /// Workgroups of the head GEMV's fused argmax (GPU profiles; `None`: not fused).
    argmax_partials: Option<u32>,
    /// A pipelined sampled step's draw from the top-k (forward/pipeline.rs), and its
    /// per-step settings and number.
    draw: Dispatch,
    draw_params: wgpu::Buffer,
    /// ln Σ exp of the (adjusted) logits, read back after the top-k for log-probabilities.
    log_z: Dispatch,
    log_z_result: wgpu::Buffer,
    /// The argmax of steps at even and odd positions (two, so that a step can be read
    /// while the next one, pipelined, is already submitted).
    token_staging: [wgpu::Buffer; 2],
    topk_staging: wgpu::Buffer,
    logits_staging: wgpu::Buffer,
    /// Submits so far (benchmarks check: one per token).
    submits: std::cell::Cell<u64>,
    /// Prompt steps submitted and not yet known done ([`GpuModel::feed`]).
    in_flight: std::collections::VecDeque<wgpu::SubmissionIndex>,
    /// Pipelined reads made while the next step was already submitted (forward/pipeline.rs).
    overlapped_reads: std::cell::Cell<u64>,
    /// The browser's step submitted ahead ([`GpuModel::decode_ahead_async`],
    /// [`GpuModel::sampled_ahead_async`]).
    ahead: std::cell::Cell<Option<pipeline::Ahead>>,
    /// GPU time of each step's pass, when enabled (benchmarks).
    timer: Option<GpuTimer>,
    /// Batched prompt processing (forward/prefill.rs).
    prefill: prefill::Prefill,
    /// Speculative decoding's verification step's buffers, once used (forward/verify.rs).
    verify: Option<verify::VerifyBuffers>,
}

/// GPU time of one kind of kernel in a decode step ([`GpuModel::profile_step`]).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// [`StepKernel::name`] (embed, qkv, attention, o, gate_up, down, head, argmax),
    /// followed by `:` and the pipeline's label where a step entry has several dispatches
    /// (attention after several splits: `attention:attention_lanes/splits` and
    /// `attention:attention_combine`).
    pub kernel: String,
    /// The pipeline's label: kernel and design (`gemv_q4/tiles/8x16/subgroup`).
    pub design: String,
    /// Bytes its dispatches read at that position, all layers (forward/bytes.rs says
    /// what counts): weights, KV cache and activations.
    pub bytes_read: u64,
    /// Its dispatches in the step (all layers).
    pub dispatches: usize,
    pub seconds: f64,
}

/// What a decode step copies back to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readback {
    /// Nothing: a prompt token whose successor is already known.
    Nothing,
    /// The layers and head only, no argmax and no copy: the first half of a sampled step
    /// whose selection (forward/select.rs) is submitted once the sampler's mask is ready.
    Forward,
    /// The argmax token (4 bytes).
    Argmax,
    /// The token drawn on the GPU from the top-k (4 bytes): a pipelined sampled step
    /// (forward/pipeline.rs), with the draw's uniform written.
    Drawn,
    /// All logits (and the argmax).
    Logits,
}

/// What a sampled step does around its selection: the sampler's adjustments first (and
/// its mask, uploaded), the normaliser after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampled {
    /// Workgroups of the uploaded logit adjustments (0: none).
    adjust_groups: u32,
    /// Also read back ln Σ exp of the logits.
    log_z: bool,
    /// The 64 best (else the argmax alone is read back).
    topk: bool,
    /// An allowed-token mask is uploaded for the selection.
    masked: bool,
}

impl GpuModel {
    /// Upload `src` to the GPU of `ctx` with a `context`-position KV cache.
    pub fn load(
        ctx: Arc<ProfiledContext>,
        src: &mut dyn ModelSource,
        context: usize,
    ) -> Result<GpuModel> {
        Self::load_with(ctx, src, context, StepOptions::default())
    }

    /// [`GpuModel::load`] with explicit step options (tests and benchmarks compare them).
    pub fn load_with(
        ctx: Arc<ProfiledContext>,
        src: &mut dyn ModelSource,
        context: usize,
        options: StepOptions,
    ) -> Result<GpuModel> {
        Self::load_as(ctx, src, context, WeightFormat::Q4, options)
    }

    /// [`GpuModel::load_with`] with each matrix as `weights` holds it (Q4 g64 or Q8 g32:
    /// `weights::slot_format`).
    pub fn load_as(
        ctx: Arc<ProfiledContext>,
        src: &mut dyn ModelSource,
        context: usize,
        weights: WeightFormat,
        options: StepOptions,
    ) -> Result<GpuModel> {
        if context == 0 {
            return Err(Error::InvalidArgument("context length 0".into()));
        }
        let format = weights;
        let weights = ModelWeights::upload(&ctx, src, format)?;
        let mut model = Self::with_options(ctx, src.config().clone(), weights, context, options)?;
        model.weight_format = format;
        Ok(model)
    }

    /// A model over `weights` already on the GPU of `ctx` (e.g. streamed there by the
    /// browser loader), with a `context`-position KV cache.
    pub fn with_weights(
        ctx: Arc<ProfiledContext>,
        config: ModelConfig,
        weights: ModelWeights,
        context: usize,
    ) -> Result<GpuModel> {
        Self::with_options(ctx, config, weights, context, StepOptions::default())
    }

    /// [`GpuModel::with_weights`] with explicit step options.
    pub fn with_options(
        ctx: Arc<ProfiledContext>,
        config: ModelConfig,
        weights: ModelWeights,
        context: usize,
        options: StepOptions,
    ) -> Result<GpuModel> {
        if context == 0 {
            return Err(Error::InvalidArgument("context length 0".into()));
        }
        let c = &*ctx;
        let kernels = Kernels::new(c, &config, context, &weights, options)?;
        let kv = KvCache::new(c, &config, context)?;
        let acts = Activations::new(c, &config, &kernels)?;
        let step = c.uniform("step", std::mem::size_of::<StepUniform>() as u64);
        let code_textures = match c.profile.code_textures {
            Some(order) => Some(ModelCodeTextures::new(c, &weights, order)?),
            None => None,
        };
        let matrices = StepMatrices {
            weights: &weights,
            textures: code_textures.as_ref(),
        };
        let dispatches = record_step(c, &kernels, &matrices, &kv, &acts, &step);
        let prefill = prefill::Prefill::new(c, &config, context, &matrices, &kv, &acts)?;
        let topk_scratch = c.storage("topk scratch", TopK::scratch_bytes())?;
        let topk_result = c.storage("topk", TopK::result_bytes())?;
        let topk = TopK::new(c, config.vocab_size).dispatch(
            c,
            &acts.logits,
            &topk_scratch,
            &topk_result,
            &acts.mask,
        );
        let adjust = LogitAdjustKernel::new(c, &acts.logits, config.vocab_size)?;
        let argmax_partials = kernels.argmax_partials.as_ref().map(|p| p.groups);
        let argmax_logits = kernels
            .argmax
            .dispatch(c, &acts.logits, &acts.argmax, &acts.mask);
        let draw_params = c.uniform("draw", SampleDraw::uniform_bytes());
        let draw = SampleDraw::new(c).dispatch(c, &topk_result, &acts.argmax, &draw_params);
        let log_z_result = c.storage("logsumexp", LogSumExp::result_bytes())?;
        let log_z = LogSumExp::new(c, config.vocab_size).dispatch(c, &acts.logits, &log_z_result);
        // Shader or pipeline errors surface here as a typed error, not a panic later.
        c.check_errors()?;
        Ok(GpuModel {
            topk,
            topk_staging: c.staging("topk", Self::topk_readback_bytes()),
            topk_result,
            adjust,
            argmax_logits,
            argmax_partials,
            draw,
            draw_params,
            log_z,
            log_z_result,
            token_staging: [c.staging("token even", 4), c.staging("token odd", 4)],
            logits_staging: c.staging("logits", 4 * config.vocab_size as u64),
            ctx,
            config,
            context,
            step,
            acts,
            weights,
            weight_format: WeightFormat::Keep,
            code_textures,
            kv,
            dispatches,
            attention: kernels.attention,
            submits: std::cell::Cell::new(0),
            in_flight: Default::default(),
            overlapped_reads: std::cell::Cell::new(0),
            ahead: std::cell::Cell::new(None),
            timer: None,
            prefill,
            verify: None,
        })
    }

    /// Dispatches per decode token at short histories (all in one command buffer, one
    /// submit).
    /// How the weights were read from their source.
    pub fn weight_format(&self) -> WeightFormat {
        self.weight_format
    }

    /// Whether any matrix is Q8 g32.
    pub fn holds_q8(&self) -> bool {
        self.weights.any_q8()
    }

    /// The matrices by format: `97 q4` or `61 q4 + 36 q8`.
    pub fn weights_summary(&self) -> String {
        self.weights.summary()
    }

    pub fn dispatches_per_token(&self) -> usize {
        self.dispatches_at(0)
    }

    /// Dispatches of the step at position `pos` (split attention adds one per layer).
    pub fn dispatches_at(&self, pos: usize) -> usize {
        let count = |d: &StepDispatch| d.at(&self.attention, pos).count();
        self.dispatches.iter().map(count).sum()
    }

    /// Dispatches of one transformer layer at short histories.
    pub fn dispatches_per_layer(&self) -> usize {
        (self.dispatches_per_token() - DISPATCHES_OUTSIDE_LAYERS) / self.config.n_layers.max(1)
    }

    /// The design of the decode attention (the profile's, with W_o folded in or not:
    /// [`crate::gpu::DeviceProfile::attention_for`]).
    pub fn attention_variant(&self) -> AttentionVariant {
        self.attention.variant()
    }

    /// Is W_o folded into decode attention ([`StepOptions::fold_output`])?
    pub fn folds_output(&self) -> bool {
        self.attention.wo.is_some()
    }

    /// The device the model lives on.
    pub fn gpu_context(&self) -> &ProfiledContext {
        &self.ctx
    }

    /// Queue submits so far (one per decode step).
    pub fn submits(&self) -> u64 {
        self.submits.get()
    }

    /// Stamp every step's pass with timestamp queries (benchmarks); false when the adapter
    /// has none. Read the time with [`GpuModel::last_step_gpu_seconds`].
    pub fn enable_gpu_timing(&mut self) -> bool {
        self.timer = GpuTimer::new(&self.ctx);
        self.timer.is_some()
    }

    /// Whether [`GpuModel::enable_gpu_timing`] has given the steps a timer.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn gpu_timing_enabled(&self) -> bool {
        self.timer.is_some()
    }

    /// GPU time of the last step's pass (waits for it), when timing is enabled.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn last_step_gpu_seconds(&self) -> Result<Option<f64>> {
        self.timer
            .as_ref()
            .map(|t| t.read_ns(&self.ctx).map(|ns| ns * 1e-9))
            .transpose()
    }

    /// Check `token` and `pos` and write the step uniform for them.
    fn write_step(&self, token: u32, pos: usize) -> Result<()> {
        if token as usize >= self.config.vocab_size {
            return Err(Error::InvalidArgument(format!(
                "token {token} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        self.write_step_uniform(token, pos)
    }

    /// Write the step uniform for `token` (or [`TOKEN_ON_GPU`]: the previous step's
    /// argmax) at `pos`, checked against the context.
    fn write_step_uniform(&self, token: u32, pos: usize) -> Result<()> {
        if pos >= self.context {
            return Err(Error::ContextTooLong {
                position: pos,
                context: self.context,
            });
        }
        let step = StepUniform {
            token,
            pos: pos as u32,
            pad: [0; 2],
        };
        self.ctx
            .queue
            .write_buffer(&self.step, 0, bytemuck::bytes_of(&step));
        Ok(())
    }

    /// The GPU time of the decode step at `pos`, per kind of kernel (in step order): each
    /// dispatch timed in its own pass, `in_a_row` times in a row there (the mean; 1: the
    /// dispatch alone, its launch and the pass's start included; more: its cost in a
    /// stream of dispatches, as in a step), best of `passes`, summed over the layers.
    /// From timestamp queries where the adapter has them, else wall time of each submit
    /// (which then includes the submit's own cost). For benchmarks: the repeated
    /// dispatches clobber the activations and position `pos` of the cache, so decode `pos`
    /// again before going on.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn profile_step(
        &self,
        token: u32,
        pos: usize,
        passes: usize,
        in_a_row: usize,
    ) -> Result<Vec<KernelTime>> {
        self.write_step(token, pos)?;
        let timer = GpuTimer::new(&self.ctx);
        let mut times = self.step_reads(pos);
        for e in self.step_entries(pos) {
            let encode = |pass: &mut wgpu::ComputePass<'_>| e.dispatch.encode_grid(pass, e.grid);
            let mut best = f64::INFINITY;
            for _ in 0..passes.max(1) {
                best = best.min(time_pass(
                    &self.ctx,
                    timer.as_ref(),
                    in_a_row.max(1),
                    encode,
                )?);
            }
            if let Some(t) = times.iter_mut().find(|t| t.kernel == e.name) {
                t.seconds += best;
            }
        }
        Ok(times)
    }

    /// The step's dispatches at `pos`, in order: each named as [`KernelTime::kernel`] says
    /// (entries of several dispatches, attention after several splits, name each by its
    /// pipeline label: `attention:LABEL`), with its grid and what it reads.
    fn step_entries(&self, pos: usize) -> Vec<bytes::Entry<'_>> {
        let shape = bytes::StepShape {
            folded: self.attention.wo.is_some(),
            parts: self.attention.parts(),
            split_len: self.attention.split_len,
            argmax_partials: self.argmax_partials,
        };
        let mut out = vec![];
        for entry in &self.dispatches {
            let parts: Vec<_> = entry.at(&self.attention, pos).collect();
            for (j, &(dispatch, grid)) in parts.iter().enumerate() {
                let (name, part) = match (parts.len(), j) {
                    (1, _) => (entry.kernel.name().to_string(), bytes::AttentionPart::Whole),
                    (_, j) => {
                        let name = format!("{}:{}", entry.kernel.name(), dispatch.label);
                        let part = match j {
                            0 => bytes::AttentionPart::Split,
                            _ => bytes::AttentionPart::Combine,
                        };
                        (name, part)
                    }
                };
                let bytes_read = bytes::bytes_read(&self.config, shape, entry.kernel, pos, part);
                out.push(bytes::Entry {
                    name,
                    dispatch,
                    grid,
                    bytes_read,
                });
            }
        }
        out
    }

    /// Each kind of kernel in the decode step at `pos`, in step order, with its dispatches
    /// and the bytes they read (forward/bytes.rs), `seconds` 0 ([`GpuModel::profile_step`]
    /// times them).
    pub fn step_reads(&self, pos: usize) -> Vec<KernelTime> {
        let mut times: Vec<KernelTime> = vec![];
        for e in self.step_entries(pos) {
            match times.iter_mut().find(|t| t.kernel == e.name) {
                Some(t) => {
                    t.dispatches += 1;
                    t.bytes_read += e.bytes_read;
                }
                None => times.push(KernelTime {
                    kernel: e.name,
                    design: e.dispatch.label.to_string(),
                    dispatches: 1,
                    seconds: 0.0,
                    bytes_read: e.bytes_read,
                }),
            }
        }
        times
    }

    /// Write the step uniform for `token` at `pos` and encode the step (copying what
    /// `readback` asks for to the staging buffers) into a command buffer.
    pub fn encode_step(
        &self,
        token: u32,
        pos: usize,
        readback: Readback,
    ) -> Result<wgpu::CommandBuffer> {
        self.write_step(token, pos)?;
        Ok(self.encode_commands(pos, readback))
    }

    /// The step at `pos` (its uniform already written) as a command buffer.
    fn encode_commands(&self, pos: usize, readback: Readback) -> wgpu::CommandBuffer {
        let ctx = &self.ctx;
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("decode step"),
                timestamp_writes: self.timer.as_ref().map(GpuTimer::pass_writes),
            });
            let selects = matches!(readback, Readback::Forward | Readback::Drawn);
            for d in &self.dispatches {
                if !(selects && d.kernel == StepKernel::Argmax) {
                    d.encode(&self.attention, pos, &mut pass);
                }
            }
            if readback == Readback::Drawn {
                self.encode_draw(&mut pass);
            }
        }
        if let Some(t) = &self.timer {
            t.resolve(&mut enc);
        }
        if !matches!(readback, Readback::Nothing | Readback::Forward) {
            let staging = &self.token_staging[pos % 2];
            enc.copy_buffer_to_buffer(&self.acts.argmax, 0, staging, 0, 4);
        }
        if readback == Readback::Logits {
            let bytes = self.logits_staging.size();
            enc.copy_buffer_to_buffer(&self.acts.logits, 0, &self.logits_staging, 0, bytes);
        }
        enc.finish()
    }

    /// Encode and submit one step (one submit).
    fn submit_step(
        &self,
        token: u32,
        pos: usize,
        readback: Readback,
    ) -> Result<wgpu::SubmissionIndex> {
        let commands = self.encode_step(token, pos, readback)?;
        Ok(self.submit(commands))
    }

    fn submit(&self, commands: wgpu::CommandBuffer) -> wgpu::SubmissionIndex {
        self.submit_all([commands])
    }

    /// Submit command buffers in order, as one submit.
    fn submit_all<const N: usize>(
        &self,
        commands: [wgpu::CommandBuffer; N],
    ) -> wgpu::SubmissionIndex {
        self.submits.set(self.submits.get() + 1);
        self.ctx.queue.submit(commands)
    }

    /// Run one decode step: `token` at position `pos` (its K/V are written to the cache;
    /// attention covers `0..=pos`). Returns the greedy next token.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn decode(&mut self, token: u32, pos: usize) -> Result<u32> {
        self.submit_step(token, pos, Readback::Argmax)?;
        self.read_token(pos)
    }

    /// Run a prompt token without reading anything back: the host does not wait for the
    /// GPU, so consecutive prompt tokens queue up, at most [`MAX_IN_FLIGHT`] (natively the
    /// host then waits for the oldest: WebGPU on iOS has been seen to crash with many
    /// queued command buffers).
    pub fn feed(&mut self, token: u32, pos: usize) -> Result<()> {
        let index = self.submit_step(token, pos, Readback::Nothing)?;
        self.bound_in_flight(index)
    }

    /// [`GpuModel::decode`] that also returns the full logits (for tests and debugging).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn decode_with_logits(&mut self, token: u32, pos: usize) -> Result<(u32, Vec<f32>)> {
        self.submit_step(token, pos, Readback::Logits)?;
        let next = self.read_token(pos)?;
        let bytes = self
            .ctx
            .read_staging(&self.logits_staging, 4 * self.config.vocab_size as u64)?;
        Ok((next, bytemuck::pod_collect_to_vec(&bytes)))
    }

    /// The argmax of the step at `pos`, once it is done.
    #[cfg(not(target_arch = "wasm32"))]
    fn read_token(&self, pos: usize) -> Result<u32> {
        let bytes = self.ctx.read_staging(&self.token_staging[pos % 2], 4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

/// Async decode steps: the readback is awaited instead of blocking (the only way in a
/// browser; natively they poll the device and are ready at once).
impl GpuModel {
    /// [`GpuModel::decode`], awaiting the readback.
    pub async fn decode_async(&mut self, token: u32, pos: usize) -> Result<u32> {
        self.submit_step(token, pos, Readback::Argmax)?;
        let staging = &self.token_staging[pos % 2];
        let bytes = self.ctx.read_staging_async(staging, 4).await?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// All logits of the step (for samplers wider than the GPU top-k), awaited.
    pub async fn decode_logits_async(&mut self, token: u32, pos: usize) -> Result<Vec<f32>> {
        self.submit_step(token, pos, Readback::Logits)?;
        let bytes = self
            .ctx
            .read_staging_async(&self.logits_staging, 4 * self.config.vocab_size as u64)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The context this model runs on.
    pub fn gpu(&self) -> &Arc<ProfiledContext> {
        &self.ctx
    }
}
