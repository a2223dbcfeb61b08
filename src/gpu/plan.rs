//! The memory planner: what a model needs on the GPU for a given context — weights, KV
//! cache, scratch — computed before anything is allocated, checked against the device's
//! buffer limits and a memory budget (sized for a tablet by default), and the largest
//! context that fits when none is requested.
//!
//! The figures are exact: `tests/gpu_plan.rs` compares them with the bytes the GPU engine
//! really allocates.

use super::buffers::padded;
use super::code_texture::ModelCodeTextures;
use super::forward::{prefill_lanes_records_bytes, prefill_scratch_sizes};
use super::kernels::argmax::mask_words;
use super::kernels::argmax_partials::ArgmaxPartials;
use super::kernels::common::attention::partials_bytes;
use super::kernels::common::gemv_spec::TextureOrder;
use super::kernels::logit_adjust::{self, LogitAdjustKernel};
use super::kernels::logsumexp::LogSumExp;
use super::kernels::sample_draw::SampleDraw;
use super::kernels::topk::TopK;
use super::kernels::MatrixFormat;
use super::kv_cache::KvCache;
use super::profile::GPU_MIN_SPLIT_LEN;
use super::profiled::ProfiledContext;
use crate::config::ModelConfig;
use crate::error::{Error, Result};

/// Default memory budget: what a tablet's browser tab can give a model without being
/// killed (iPadOS reclaims tabs well before the device's RAM is used up).
pub const TABLET_BUDGET: u64 = 1 << 30;

/// Where the plan must fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// All GPU buffers together.
    pub total: u64,
    /// Largest single buffer / storage binding the device allows.
    pub max_buffer: u64,
    pub max_binding: u64,
    /// The device keeps the decode GEMVs' codes again as textures in this order (CPU
    /// adapters: `gpu::code_texture`).
    pub code_textures: Option<TextureOrder>,
    /// The device runs the row-lanes prefill GEMM (CPU adapters), with this uniform
    /// binding limit (its tile sizes depend on it).
    pub lanes_gemm_uniform: Option<u64>,
    /// The head GEMV fuses the argmax, one (index, value) per workgroup of this many rows
    /// (GPU profiles).
    pub head_argmax_rows: Option<u32>,
    /// The load holds Q8 g32 matrices: every matrix is counted as Q8 (twice the Q4
    /// codes; an upper bound where only some are, as in a Q4_K_M file's).
    pub q8_weights: bool,
}

impl Budget {
    /// A tablet budget with the device limits of `limits` (the adapter's, not WebGPU's
    /// defaults: the engine raises limits the model needs when the adapter has them).
    pub fn new(total: u64, limits: &wgpu::Limits) -> Budget {
        Budget {
            total,
            max_buffer: limits.max_buffer_size,
            max_binding: limits.max_storage_buffer_binding_size,
            code_textures: None,
            lanes_gemm_uniform: None,
            head_argmax_rows: None,
            q8_weights: false,
        }
    }

    /// [`Budget::new`] for the device of `ctx`, with its profile's code textures and
    /// prefill GEMM.
    pub fn for_device(total: u64, ctx: &ProfiledContext) -> Budget {
        Budget {
            code_textures: ctx.profile.code_textures,
            lanes_gemm_uniform: ctx
                .profile
                .gemm
                .is_lanes()
                .then_some(ctx.limits.max_uniform_buffer_binding_size),
            head_argmax_rows: ctx.profile.gemv.head.fused_argmax_rows(),
            ..Budget::new(total, &ctx.limits)
        }
    }
}

/// GPU memory of one model at one context length, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    pub context: usize,
    pub weights: u64,
    pub kv_cache: u64,
    /// Activations, attention scores, logits, readback buffers.
    pub scratch: u64,
    /// The largest single buffer.
    pub largest_buffer: u64,
    /// The largest storage binding: the largest buffer, but a Q8 vocabulary table's
    /// codes, which are bound in parts ([`crate::gpu::weights::MatrixBuffers::parts`]).
    pub largest_binding: u64,
    /// The decode GEMVs' codes again as textures, on devices that read them so.
    pub code_textures: u64,
}

/// Bytes of a `rows` × `cols` matrix in `format` (codes, then qparams or scales).
fn matrix(format: MatrixFormat, rows: usize, cols: usize) -> u64 {
    padded(format.code_bytes(rows, cols)) + padded(MatrixFormat::param_bytes(rows, cols))
}

fn f32s(n: usize) -> u64 {
    padded(4 * n as u64)
}

impl MemoryPlan {
    /// The plan of `cfg` with a `context`-position KV cache (Q4 matrices).
    pub fn new(cfg: &ModelConfig, context: usize) -> MemoryPlan {
        Self::new_in(cfg, context, MatrixFormat::Q4)
    }

    /// [`MemoryPlan::new`] with every matrix in `format`.
    pub fn new_in(cfg: &ModelConfig, context: usize, format: MatrixFormat) -> MemoryPlan {
        let q4 = |rows, cols| matrix(format, rows, cols);
        let (h, f, v, hd) = (cfg.hidden_size, cfg.ffn_size, cfg.vocab_size, cfg.head_dim);
        let qkv = cfg.q_dim() + 2 * cfg.kv_dim();
        let layer = f32s(h)
            + q4(qkv, h)
            + if cfg.qkv_bias { f32s(qkv) } else { 0 }
            + if cfg.qk_norm { 2 * f32s(hd) } else { 0 }
            + q4(h, cfg.q_dim())
            + f32s(h)
            + q4(2 * f, h)
            + q4(h, f);
        let head = if cfg.tie_embeddings { 0 } else { q4(v, h) };
        let weights = q4(v, h) + cfg.n_layers as u64 * layer + f32s(h) + head;
        let kv_layer = padded(KvCache::layer_bytes(cfg, context));
        let kv_cache = 2 * cfg.n_layers as u64 * kv_layer;
        let scores = padded((cfg.n_heads * context * 4) as u64);
        let partials = padded(partials_bytes(
            KvCache::shape(cfg, context),
            GPU_MIN_SPLIT_LEN,
        ));
        // Two residual buffers (the folded output projection ping-pongs between them),
        // the heads' projection parts, and the attention output.
        let activations = 2 * f32s(h)
            + f32s(cfg.n_heads * h)
            + f32s(qkv)
            + f32s(cfg.q_dim())
            + f32s(cfg.ffn_size)
            + f32s(v)
            + f32s(2)
            + f32s(4)
            + f32s(hd / 2);
        // Two token stagings (pipelined decode reads one while the next step runs).
        // The top-k staging holds the normaliser after the candidates.
        let topk_readback = padded(TopK::result_bytes() + LogSumExp::result_bytes());
        let readback = 2 * padded(4) + topk_readback + padded(4 * v as u64);
        let step = padded(16);
        // Top-k scratch and result, the sampler's logit adjustments (their first list)
        // and the normaliser.
        let topk = padded(TopK::scratch_bytes())
            + padded(TopK::result_bytes())
            + padded(LogitAdjustKernel::list_bytes(logit_adjust::INITIAL_ENTRIES))
            + padded(LogSumExp::result_bytes())
            // The allowed-token mask of constrained decoding (word 0 is its flag).
            + padded(4 * mask_words(v) as u64)
            // A pipelined sampled step's draw settings, and the fused head argmax's
            // partials (a one-entry stand-in where the head does not fuse it:
            // `for_budget` counts the GPU profiles' own).
            + padded(SampleDraw::uniform_bytes())
            + padded(ArgmaxPartials::partials_bytes(0));
        let prefill: Vec<u64> = prefill_scratch_sizes(cfg, context)
            .iter()
            .map(|(_, bytes)| padded(*bytes))
            .collect();
        let table = padded(format.code_bytes(v, h));
        let largest_binding = [
            padded(format.code_bytes(qkv, h)),
            padded(format.code_bytes(2 * f, h)),
            kv_layer,
            scores,
            f32s(v),
        ]
        .into_iter()
        .chain(prefill.iter().copied())
        .max()
        .unwrap_or(0);
        let largest_buffer = largest_binding.max(table);
        let largest_binding = match format {
            MatrixFormat::Q4 => largest_buffer,
            MatrixFormat::Q8 => largest_binding,
        };
        MemoryPlan {
            context,
            weights,
            kv_cache,
            scratch: scores
                + partials
                + activations
                + readback
                + step
                + topk
                + prefill.iter().sum::<u64>(),
            largest_buffer,
            largest_binding,
            code_textures: 0,
        }
    }

    /// [`MemoryPlan::new`] plus what `budget`'s device adds: the code textures and the
    /// row-lanes GEMM's tile records (CPU adapters), the fused head argmax's partials
    /// (GPU profiles).
    pub fn for_budget(cfg: &ModelConfig, context: usize, budget: &Budget) -> MemoryPlan {
        let format = match budget.q8_weights {
            true => MatrixFormat::Q8,
            false => MatrixFormat::Q4,
        };
        let plan = MemoryPlan::new_in(cfg, context, format);
        let records = budget
            .lanes_gemm_uniform
            .map_or(0, |limit| prefill_lanes_records_bytes(cfg, context, limit));
        let head_partials = budget.head_argmax_rows.map_or(0, |rows| {
            let groups = (cfg.vocab_size as u32).div_ceil(rows);
            padded(ArgmaxPartials::partials_bytes(groups))
                - padded(ArgmaxPartials::partials_bytes(0))
        });
        MemoryPlan {
            code_textures: budget
                .code_textures
                .map_or(0, |order| ModelCodeTextures::bytes(cfg, order)),
            scratch: plan.scratch + records + head_partials,
            ..plan
        }
    }

    pub fn total(&self) -> u64 {
        self.weights + self.kv_cache + self.scratch + self.code_textures
    }

    /// Does the plan fit `budget`? An error naming what does not fit.
    pub fn check(&self, budget: &Budget) -> Result<()> {
        let too_big = |limit: &'static str, needed: u64, available: u64| {
            Err(Error::ExceedsDeviceLimits {
                what: format!("the model at context {}", self.context),
                limit,
                needed,
                available,
            })
        };
        if self.largest_buffer > budget.max_buffer {
            return too_big("max_buffer_size", self.largest_buffer, budget.max_buffer);
        }
        if self.largest_binding > budget.max_binding {
            return too_big(
                "max_storage_buffer_binding_size",
                self.largest_binding,
                budget.max_binding,
            );
        }
        if self.total() > budget.total {
            return Err(Error::OverMemoryBudget {
                context: self.context,
                needed: self.total(),
                budget: budget.total,
            });
        }
        Ok(())
    }

    /// The plan for `requested` positions (checked), or for the largest context up to the
    /// model's that fits `budget`. An error, before anything is allocated, when not even a
    /// one-position context fits.
    pub fn choose(
        cfg: &ModelConfig,
        requested: Option<usize>,
        budget: &Budget,
    ) -> Result<MemoryPlan> {
        if let Some(c) = requested {
            if c == 0 || c > cfg.max_context {
                return Err(Error::InvalidArgument(format!(
                    "context {c} is outside 1..={} (the model's context)",
                    cfg.max_context
                )));
            }
            let plan = MemoryPlan::for_budget(cfg, c, budget);
            plan.check(budget)?;
            return Ok(plan);
        }
        MemoryPlan::for_budget(cfg, 1, budget).check(budget)?;
        // The plan grows with the context: binary search for the largest that fits.
        let (mut lo, mut hi) = (1, cfg.max_context);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if MemoryPlan::for_budget(cfg, mid, budget)
                .check(budget)
                .is_ok()
            {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(MemoryPlan::for_budget(cfg, lo, budget))
    }
}
