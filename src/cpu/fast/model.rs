//! The fast decoder: the oracle's forward pass (`cpu::Model`) with every matrix product on
//! the int8 kernels, q/k/v stacked into one matrix, gate/up fused with the SwiGLU, and the
//! attention heads split across threads once the context is long enough to pay; and
//! batched prefill of prompt chunks (`prefill.rs`).

use super::acts::{Acts, Precision};
use super::gemv::{for_row_chunks, gemv, gemv_swiglu, on_pool, threads};
use super::kernel::{Kernel, KernelTiming, Rows};
use super::memory::{Matrix, WeightMemory};
use super::packed::{Format, Packed};
use crate::config::ModelConfig;
use crate::cpu::ops::{add_in_place, attend_head, rmsnorm, rmsnorm_into, KvHead, Rope};
use crate::cpu::{KvCache, LayerWeights, ModelWeights, Weight, WeightMode};
use crate::error::{Error, Result};
use crate::format::ModelSource;
use crate::quant::WeightFormat;

mod prefill;

pub use prefill::{Logits, PREFILL_CHUNK};

/// Attention work (positions × query dims) below which the heads run on one thread.
const PARALLEL_ATTENTION_WORK: usize = 1 << 15;

/// One transformer block, ready for the fast kernels (its matrices in the model's
/// [`WeightMemory`]).
#[derive(Clone, Debug)]
struct Layer {
    attn_norm: Vec<f32>,
    /// Wq, Wk and Wv stacked: `q_dim + 2·kv_dim` rows.
    qkv: Matrix,
    /// bq, bk, bv stacked likewise (qwen2).
    qkv_bias: Option<Vec<f32>>,
    qk_norm: Option<[Vec<f32>; 2]>,
    wo: Matrix,
    ffn_norm: Vec<f32>,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

/// A model on the fast CPU backend: Q4 g64 and/or Q8 g32 weights, decode one token at a
/// time.
#[derive(Debug)]
pub struct FastModel {
    pub config: ModelConfig,
    kernel: Kernel,
    precision: Precision,
    /// Every matrix's codes and params.
    weights: WeightMemory,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    /// `None` when tied to `token_embd`.
    output: Option<Matrix>,
    /// Prompt tokens per batched-prefill chunk.
    prefill_chunk: usize,
    /// How the weights were asked for (`None`: taken over from the oracle's).
    format: Option<WeightFormat>,
    /// The SIMD kernels' times on this model's matrix when the kernel was chosen by
    /// timing ([`FastModel::load_as`]; empty otherwise).
    kernel_timings: Vec<KernelTiming>,
}

/// A matrix in the kernels' layout.
fn packed(w: Weight) -> Result<Packed> {
    match w {
        Weight::Q4(q) => Ok(Packed::from(q)),
        Weight::Q8(q) => Ok(Packed::from(&q)),
        Weight::F32 { .. } => Err(Error::InvalidArgument(
            "the fast CPU backend runs Q4 g64 and Q8 g32 weights only".into(),
        )),
    }
}

/// A layer's weights apart from its matrices, which go into the model's memory in
/// [`MATRICES`] order.
struct LayerRest {
    attn_norm: Vec<f32>,
    qkv_bias: Option<Vec<f32>>,
    qk_norm: Option<[Vec<f32>; 2]>,
    ffn_norm: Vec<f32>,
}

/// Matrices per layer: qkv, wo, gate, up, down, in the order decode reads them.
const MATRICES: usize = 5;

/// Split a layer's weights into its matrices (qkv stacked) and the rest.
fn split(l: LayerWeights) -> Result<([Packed; MATRICES], LayerRest)> {
    let qkv = Packed::stack(vec![packed(l.wq)?, packed(l.wk)?, packed(l.wv)?])?;
    let matrices = [
        qkv,
        packed(l.wo)?,
        packed(l.w_gate)?,
        packed(l.w_up)?,
        packed(l.w_down)?,
    ];
    let rest = LayerRest {
        attn_norm: l.attn_norm,
        qkv_bias: l.qkv_bias.map(|b| b.concat()),
        qk_norm: l.qk_norm,
        ffn_norm: l.ffn_norm,
    };
    Ok((matrices, rest))
}

impl Layer {
    fn new(m: &[Matrix], rest: LayerRest) -> Layer {
        let [qkv, wo, gate, up, down] = m.try_into().expect("a layer's matrices");
        Layer {
            attn_norm: rest.attn_norm,
            qkv,
            qkv_bias: rest.qkv_bias,
            qk_norm: rest.qk_norm,
            wo,
            ffn_norm: rest.ffn_norm,
            gate,
            up,
            down,
        }
    }
}

/// Per-step buffers.
struct Scratch {
    h: Vec<f32>,
    acts: Acts,
    qkv: Vec<f32>,
    attn: Vec<f32>,
    ffn: Vec<f32>,
}

impl FastModel {
    /// Load from any source with Q4 g64 weights (kept when stored so, quantized
    /// otherwise), on the fastest kernel this CPU runs, with matrix inputs in `precision`:
    /// [`FastModel::load_as`] with [`WeightFormat::Q4`].
    pub fn load(src: &mut dyn ModelSource, precision: Precision) -> Result<FastModel> {
        Self::load_as(src, precision, WeightFormat::Q4)
    }

    /// [`FastModel::load`] with the matrices in `format`: every one Q4 g64, every one Q8
    /// g32, or each as the source has it (keep: 4-bit types as Q4 g64, the rest as Q8 g32).
    pub fn load_as(
        src: &mut dyn ModelSource,
        precision: Precision,
        format: WeightFormat,
    ) -> Result<FastModel> {
        let config = src.config().clone();
        config.validate("model config")?;
        let mode = match format {
            WeightFormat::Q4 => WeightMode::Q4,
            WeightFormat::Q8 => WeightMode::Q8,
            WeightFormat::Keep => WeightMode::Keep,
        };
        let weights = ModelWeights::load(src, mode)?;
        let mut model = Self::from_weights(config, weights, Kernel::best(), precision)?;
        model.format = Some(format);
        if precision == Precision::Int8 {
            model.choose_kernel();
        }
        Ok(model)
    }

    /// Run on the fastest of this CPU's SIMD kernels on the first layer's gate matrix
    /// ([`Kernel::fastest_for`]; natively, where no `POCKETRT_CPU_KERNEL` names one). The
    /// wasm builds pick theirs at compile time.
    fn choose_kernel(&mut self) {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(layer) = self.layers.first() {
            let (kernel, timings) = Kernel::fastest_for(self.rows(&layer.gate));
            self.kernel = kernel;
            self.kernel_timings = timings;
        }
    }

    /// Take over Q4 / Q8 weights loaded for the oracle, running on `kernel` in `precision`
    /// (q, k and v stacked into one matrix: as Q8 g32 where their formats differ,
    /// [`Packed::stack`]).
    pub fn from_weights(
        config: ModelConfig,
        w: ModelWeights,
        kernel: Kernel,
        precision: Precision,
    ) -> Result<Self> {
        // The matrices in the order decode reads them: embedding, each layer's, head.
        let mut tensors = vec![packed(w.token_embd)?];
        let mut rests = Vec::with_capacity(w.layers.len());
        for l in w.layers {
            let (m, rest) = split(l)?;
            tensors.extend(m);
            rests.push(rest);
        }
        let tied = w.output.is_none();
        if let Some(out) = w.output {
            tensors.push(packed(out)?);
        }
        let (weights, m) = WeightMemory::new(tensors);
        let layers = rests
            .into_iter()
            .zip(m[1..].chunks(MATRICES))
            .map(|(rest, m)| Layer::new(m, rest))
            .collect();
        Ok(FastModel {
            config,
            kernel,
            precision,
            weights,
            token_embd: m[0],
            layers,
            output_norm: w.output_norm,
            output: (!tied).then(|| m[m.len() - 1]),
            prefill_chunk: prefill::PREFILL_CHUNK,
            format: None,
            kernel_timings: Vec::new(),
        })
    }

    /// The rows of one of the model's matrices.
    fn rows(&self, m: &Matrix) -> Rows<'_> {
        self.weights.rows(m)
    }

    /// The output head (the embedding when tied).
    fn head(&self) -> Rows<'_> {
        self.rows(self.output.as_ref().unwrap_or(&self.token_embd))
    }

    /// Bytes of matrix weights, and how many of them lie on memory advised as
    /// transparent huge pages.
    pub fn weight_memory(&self) -> (usize, usize) {
        (self.weights.bytes(), self.weights.huge_page_bytes())
    }

    /// The same model on `kernel` (one of [`Kernel::available`]).
    pub fn with_kernel(mut self, kernel: Kernel) -> FastModel {
        self.kernel = kernel;
        self
    }

    /// The same model with batched prefill in chunks of `tokens` (at least 1) prompt
    /// tokens.
    pub fn with_prefill_chunk(mut self, tokens: usize) -> FastModel {
        self.prefill_chunk = tokens.max(1);
        self
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The matrices' formats, the one holding most bytes first: "q4 g64", or
    /// "q8 g32 + q4 g64" (a keep model's mix).
    pub fn weight_formats(&self) -> String {
        let mut bytes = [(0usize, Format::Q8), (0, Format::Q4)];
        let layers = self.layers.iter();
        let matrices = layers.flat_map(|l| [&l.qkv, &l.wo, &l.gate, &l.up, &l.down]);
        for m in matrices.chain([&self.token_embd]).chain(&self.output) {
            let i = usize::from(m.format == Format::Q4);
            bytes[i].0 += m.rows * m.cols.div_ceil(64) * (m.format.words() + 1);
        }
        bytes.sort_by_key(|b| std::cmp::Reverse(b.0));
        let held = bytes.iter().filter(|(b, _)| *b > 0).map(|(_, f)| f.name());
        held.collect::<Vec<_>>().join(" + ")
    }

    /// "keep weights: q8 g32 + q4 g64" (or, for weights taken over from the oracle's, the
    /// formats alone): for descriptions.
    pub fn describe_weights(&self) -> String {
        match self.format {
            Some(f) => format!("{} weights: {}", f.name(), self.weight_formats()),
            None => format!("weights: {}", self.weight_formats()),
        }
    }

    /// "avx2 int8 kernels (timed µs per token, GEMV + tile: avx2 141, avx512-vnni 165),
    /// 2 threads, huge pages": for descriptions.
    pub fn describe(&self) -> String {
        let (k, p) = (self.kernel.name(), self.precision.name());
        let huge = match self.weights.huge_page_bytes() {
            0 => "",
            _ => ", huge pages",
        };
        let timed = self.kernel_timings.iter();
        let timed: Vec<_> = timed
            .map(|t| format!("{} {:.1}", t.kernel.name(), t.score()))
            .collect();
        let timed = match timed.is_empty() {
            true => String::new(),
            false => format!(" (timed µs per token, GEMV + tile: {})", timed.join(", ")),
        };
        format!("{k} {p} kernels{timed}, {} threads{huge}", threads())
    }

    /// The SIMD kernels' times on this model when its kernel was chosen by timing.
    pub fn kernel_timings(&self) -> &[KernelTiming] {
        &self.kernel_timings
    }

    /// An empty cache for up to `max_len` tokens (f32, as the oracle's).
    pub fn new_cache(&self, max_len: usize) -> Result<KvCache> {
        KvCache::new(&self.config, max_len)
    }

    /// Run `token` at position `cache.len()`, append its keys and values to the cache,
    /// and return the logits over the vocabulary.
    pub fn forward(&self, token: u32, cache: &mut KvCache) -> Result<Vec<f32>> {
        let pos = cache.check_step(&self.config, token)?;
        Ok(on_pool(|| self.step(token, pos, cache)))
    }

    /// [`FastModel::forward`] of a checked `token` at `pos`.
    fn step(&self, token: u32, pos: usize, cache: &mut KvCache) -> Vec<f32> {
        let cfg = &self.config;
        let mut x = vec![0.0f32; cfg.hidden_size];
        self.weights
            .dequantize_row(&self.token_embd, token as usize, &mut x);
        let rope = Rope::new(cfg.head_dim, cfg.rope_theta, pos);
        let mut s = Scratch {
            h: vec![0.0; cfg.hidden_size],
            acts: Acts {
                precision: self.precision,
                ..Acts::default()
            },
            qkv: vec![0.0; cfg.q_dim() + 2 * cfg.kv_dim()],
            attn: vec![0.0; cfg.q_dim()],
            ffn: vec![0.0; cfg.ffn_size],
        };
        for (li, layer) in self.layers.iter().enumerate() {
            self.attention_block(li, &rope, &mut x, &mut s, cache, pos);
            rmsnorm_into(&x, &layer.ffn_norm, cfg.rms_eps, &mut s.h);
            s.acts.set(&s.h);
            let (gate, up) = (self.rows(&layer.gate), self.rows(&layer.up));
            gemv_swiglu(self.kernel, gate, up, &s.acts, &mut s.ffn);
            s.acts.set(&s.ffn);
            gemv(self.kernel, self.rows(&layer.down), &s.acts, &mut s.h);
            add_in_place(&mut x, &s.h);
        }
        cache.len = pos + 1;
        rmsnorm(&mut x, &self.output_norm, cfg.rms_eps);
        s.acts.set(&x);
        let mut logits = vec![0.0f32; cfg.vocab_size];
        gemv(self.kernel, self.head(), &s.acts, &mut logits);
        logits
    }

    /// `x += Wo · attention(...)` of layer `li`, writing this token's k and v into the
    /// cache at `pos`.
    fn attention_block(
        &self,
        li: usize,
        rope: &Rope,
        x: &mut [f32],
        s: &mut Scratch,
        cache: &mut KvCache,
        pos: usize,
    ) {
        let (cfg, layer) = (&self.config, &self.layers[li]);
        let (hd, q_dim) = (cfg.head_dim, cfg.q_dim());
        rmsnorm_into(x, &layer.attn_norm, cfg.rms_eps, &mut s.h);
        s.acts.set(&s.h);
        gemv(self.kernel, self.rows(&layer.qkv), &s.acts, &mut s.qkv);
        self.qkv_to_cache(li, rope, &mut s.qkv, cache, pos);
        let q = &s.qkv[..q_dim];
        let (keys, values) = (&cache.keys[li][..], &cache.values[li][..]);
        let heads = |first: usize, out: &mut [f32]| {
            self.attend(q, first / hd, (keys, values), pos + 1, out);
        };
        if (pos + 1) * q_dim >= PARALLEL_ATTENTION_WORK {
            for_row_chunks(&mut s.attn, hd, heads);
        } else {
            heads(0, &mut s.attn);
        }
        s.acts.set(&s.attn);
        gemv(self.kernel, self.rows(&layer.wo), &s.acts, &mut s.h);
        add_in_place(x, &s.h);
    }

    /// One token's stacked `q | k | v` (`qkv`) of layer `li` made ready: bias added
    /// (qwen2), q and k normed per head (qwen3) and rotated to `rope`'s position; k and v
    /// written into the cache at `pos`.
    fn qkv_to_cache(
        &self,
        li: usize,
        rope: &Rope,
        qkv: &mut [f32],
        cache: &mut KvCache,
        pos: usize,
    ) {
        let (cfg, layer) = (&self.config, &self.layers[li]);
        let (hd, q_dim, kv_dim) = (cfg.head_dim, cfg.q_dim(), cfg.kv_dim());
        if let Some(b) = &layer.qkv_bias {
            add_in_place(qkv, b);
        }
        let (q, kv) = qkv.split_at_mut(q_dim);
        let (k, v) = kv.split_at_mut(kv_dim);
        if let Some([nq, nk]) = &layer.qk_norm {
            for (x, w) in [(&mut *q, nq), (&mut *k, nk)] {
                for head in x.chunks_exact_mut(hd) {
                    rmsnorm(head, w, cfg.rms_eps);
                }
            }
        }
        rope.apply(q);
        rope.apply(k);
        cache.keys[li][pos * kv_dim..][..kv_dim].copy_from_slice(k);
        cache.values[li][pos * kv_dim..][..kv_dim].copy_from_slice(v);
    }

    /// Query heads `first..first + out.len() / head_dim` of one token (`q`: all its query
    /// heads) attending to positions `0..len` of a layer's cached `(keys, values)`.
    fn attend(&self, q: &[f32], first: usize, kv: (&[f32], &[f32]), len: usize, out: &mut [f32]) {
        let heads = Heads { q, first, kv, len };
        #[cfg(target_arch = "x86_64")]
        if matches!(
            self.kernel,
            Kernel::Avx2 | Kernel::AvxVnni | Kernel::Avx512Vnni
        ) {
            // SAFETY: these kernels are offered only where the CPU has AVX2 and FMA.
            return unsafe { attend_avx2(&self.config, heads, out) };
        }
        attend_heads(&self.config, heads, out);
    }
}

/// What [`FastModel::attend`] computes: query heads `first..` of `q` over positions
/// `0..len` of `kv`.
#[derive(Clone, Copy)]
struct Heads<'a> {
    q: &'a [f32],
    first: usize,
    kv: (&'a [f32], &'a [f32]),
    len: usize,
}

/// [`FastModel::attend`]. Compiled portably, and with AVX2 for the CPUs the AVX2 kernels
/// run on (the same operations, eight lanes wide: the same numbers). Grouped-query
/// attention: query head h reads KV head h / group.
#[inline(always)]
fn attend_heads(cfg: &ModelConfig, heads: Heads, out: &mut [f32]) {
    let Heads { q, first, kv, len } = heads;
    let hd = cfg.head_dim;
    let group = cfg.n_heads / cfg.n_kv_heads;
    let scale = 1.0 / (hd as f32).sqrt();
    let mut scores = vec![0.0f32; len];
    for (i, out) in out.chunks_exact_mut(hd).enumerate() {
        let h = first + i;
        let head = KvHead {
            keys: kv.0,
            values: kv.1,
            kv_dim: cfg.kv_dim(),
            offset: (h / group) * hd,
        };
        attend_head(&q[h * hd..][..hd], &head, scale, &mut scores, out);
    }
}

/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_avx2(cfg: &ModelConfig, heads: Heads, out: &mut [f32]) {
    attend_heads(cfg, heads, out);
}
