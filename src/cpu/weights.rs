//! Weight matrices for the oracle — f32, or Q4 g64 / Q8 g32 dequantized one row at a time
//! inside the matvec (so the quantized paths are checked by the same code) — and loading
//! a model's tensors from any `ModelSource` by canonical name.

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::ModelSource;
use crate::quant::{Q4Tensor, Q8Tensor, QMatrix, WeightFormat, GROUP};

use super::ops::dot;

/// How to hold the 2-D weight matrices (norms and biases are always f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightMode {
    /// Every matrix as f32 (quantized sources are dequantized).
    F32,
    /// Every matrix as Q4 g64 (`ModelSource::read_q4`: kept when stored so, quantized
    /// otherwise).
    Q4,
    /// Every matrix as Q8 g32 (`ModelSource::read_q8`).
    Q8,
    /// Each matrix as its source stores it ([`WeightFormat::Keep`]: 4-bit types as Q4 g64,
    /// the rest as Q8 g32).
    Keep,
}

impl WeightMode {
    pub fn name(self) -> &'static str {
        match self {
            WeightMode::F32 => "f32",
            WeightMode::Q4 => "q4",
            WeightMode::Q8 => "q8",
            WeightMode::Keep => "keep",
        }
    }

    /// The quantized format, for every mode but f32.
    pub fn format(self) -> Option<WeightFormat> {
        match self {
            WeightMode::F32 => None,
            WeightMode::Q4 => Some(WeightFormat::Q4),
            WeightMode::Q8 => Some(WeightFormat::Q8),
            WeightMode::Keep => Some(WeightFormat::Keep),
        }
    }
}

/// A `rows × cols` matrix, row-major.
#[derive(Clone, Debug)]
pub enum Weight {
    F32 {
        rows: usize,
        cols: usize,
        data: Vec<f32>,
    },
    Q4(Q4Tensor),
    Q8(Q8Tensor),
}

/// Output rows one parallel task computes (amortises the Q4 row buffer).
#[cfg(not(target_arch = "wasm32"))]
const ROWS_PER_TASK: usize = 64;

impl Weight {
    /// An f32 matrix; `data.len()` must be `rows * cols`.
    pub fn f32(name: &str, rows: usize, cols: usize, data: Vec<f32>) -> Result<Weight> {
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(shape_error(name, &[rows, cols], &[data.len()]));
        }
        Ok(Weight::F32 { rows, cols, data })
    }

    /// A Q4 matrix, checked for whole groups and complete code / parameter arrays.
    pub fn q4(name: &str, q: Q4Tensor) -> Result<Weight> {
        let n = q.rows.checked_mul(q.cols);
        let complete = q.cols.is_multiple_of(GROUP)
            && n.map(|n| n / 8) == Some(q.codes.len())
            && n.map(|n| n / GROUP) == Some(q.qparams.len());
        if !complete {
            return Err(Error::corrupt(
                name,
                format!(
                    "Q4 g64 {}×{} needs cols a multiple of {GROUP}, {} code words and {} \
                     param words; has {} and {}",
                    q.rows,
                    q.cols,
                    n.unwrap_or(0) / 8,
                    n.unwrap_or(0) / GROUP,
                    q.codes.len(),
                    q.qparams.len()
                ),
            ));
        }
        Ok(Weight::Q4(q))
    }

    /// A quantized matrix of either format (a Q4 one checked as [`Weight::q4`] does; a
    /// Q8 one's parts are sized by its constructors).
    pub fn quantized(name: &str, q: QMatrix) -> Result<Weight> {
        match q {
            QMatrix::Q4(q) => Weight::q4(name, q),
            QMatrix::Q8(q) => Ok(Weight::Q8(q)),
        }
    }

    pub fn rows(&self) -> usize {
        match self {
            Weight::F32 { rows, .. } => *rows,
            Weight::Q4(q) => q.rows,
            Weight::Q8(q) => q.rows,
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            Weight::F32 { cols, .. } => *cols,
            Weight::Q4(q) => q.cols,
            Weight::Q8(q) => q.cols,
        }
    }

    /// Row `r` as f32 into `out` (`out.len() == cols`); used for embedding lookups.
    pub fn row(&self, r: usize, out: &mut [f32]) {
        match self {
            Weight::F32 { cols, data, .. } => out.copy_from_slice(&data[r * cols..][..*cols]),
            Weight::Q4(q) => q.dequantize_row(r, out),
            Weight::Q8(q) => q.dequantize_row(r, out),
        }
    }

    /// `out ← W · x` (`x.len() == cols`, `out.len() == rows`), parallel over output rows
    /// natively, sequential on wasm.
    pub fn matvec(&self, x: &[f32], out: &mut [f32]) {
        assert_eq!(x.len(), self.cols(), "matvec input length");
        assert_eq!(out.len(), self.rows(), "matvec output length");
        #[cfg(not(target_arch = "wasm32"))]
        {
            use rayon::prelude::*;
            out.par_chunks_mut(ROWS_PER_TASK)
                .enumerate()
                .for_each(|(i, chunk)| self.rows_times(x, i * ROWS_PER_TASK, chunk));
        }
        #[cfg(target_arch = "wasm32")]
        self.rows_times(x, 0, out);
    }

    /// `out[i] ← W[first + i] · x` for the rows `out` covers.
    fn rows_times(&self, x: &[f32], first: usize, out: &mut [f32]) {
        match self {
            Weight::F32 { cols, data, .. } => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = dot(&data[(first + i) * cols..][..*cols], x);
                }
            }
            Weight::Q4(_) | Weight::Q8(_) => {
                let mut row = vec![0.0f32; self.cols()];
                for (i, o) in out.iter_mut().enumerate() {
                    self.row(first + i, &mut row);
                    *o = dot(&row, x);
                }
            }
        }
    }
}

fn shape_error(name: &str, expected: &[usize], found: &[usize]) -> Error {
    Error::ShapeMismatch {
        tensor: name.to_string(),
        expected: expected.to_vec(),
        found: found.to_vec(),
    }
}

/// One transformer block's weights.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: Weight,
    pub wk: Weight,
    pub wv: Weight,
    /// q/k/v biases (qwen2).
    pub qkv_bias: Option<[Vec<f32>; 3]>,
    /// Per-head RMSNorm weights for q and k (qwen3), `head_dim` each.
    pub qk_norm: Option<[Vec<f32>; 2]>,
    pub wo: Weight,
    pub ffn_norm: Vec<f32>,
    pub w_gate: Weight,
    pub w_up: Weight,
    pub w_down: Weight,
}

/// All weights of a model.
#[derive(Clone, Debug)]
pub struct ModelWeights {
    pub token_embd: Weight,
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>,
    /// The LM head; `None` when tied to `token_embd`.
    pub output: Option<Weight>,
    /// How the matrices were loaded.
    pub mode: WeightMode,
}

/// Reads tensors by canonical name, checking each against the config's expected shape.
struct Loader<'a> {
    src: &'a mut dyn ModelSource,
    mode: WeightMode,
    expected: Vec<(String, Vec<usize>)>,
}

impl Loader<'_> {
    /// The expected shape of `name`, after checking the source has it with that shape.
    fn shape(&self, name: &str) -> Result<Vec<usize>> {
        let expected = self
            .expected
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
            .ok_or_else(|| Error::MissingTensor(format!("{name} (not expected by the config)")))?;
        let found = self
            .src
            .tensors()
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))?;
        if found.shape != expected {
            return Err(shape_error(name, &expected, &found.shape));
        }
        Ok(expected)
    }

    /// A 1-D tensor (norm weight or bias) as f32.
    fn vector(&mut self, name: &str) -> Result<Vec<f32>> {
        let shape = self.shape(name)?;
        let data = self.src.read_f32(name)?;
        if data.len() != shape.iter().product::<usize>() {
            return Err(shape_error(name, &shape, &[data.len()]));
        }
        Ok(data)
    }

    /// A 2-D matrix in the loader's mode.
    fn matrix(&mut self, name: &str) -> Result<Weight> {
        let shape = self.shape(name)?;
        let (rows, cols) = match shape[..] {
            [r, c] => (r, c),
            _ => return Err(shape_error(name, &[0, 0], &shape)),
        };
        match self.mode.format() {
            None => Weight::f32(name, rows, cols, self.src.read_f32(name)?),
            Some(format) => {
                let (q, _stats) = self.src.read_matrix(name, format)?;
                if (q.rows(), q.cols()) != (rows, cols) {
                    return Err(shape_error(name, &shape, &[q.rows(), q.cols()]));
                }
                Weight::quantized(name, q)
            }
        }
    }
}

impl ModelWeights {
    /// Load every tensor `cfg.expected_tensors()` names from `src`.
    pub fn load(src: &mut dyn ModelSource, mode: WeightMode) -> Result<ModelWeights> {
        let cfg: ModelConfig = src.config().clone();
        let expected = cfg.expected_tensors();
        let mut l = Loader {
            src,
            mode,
            expected,
        };
        let token_embd = l.matrix("token_embd.weight")?;
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}");
            let qkv_bias = if cfg.qkv_bias {
                Some([
                    l.vector(&n("attn_q.bias"))?,
                    l.vector(&n("attn_k.bias"))?,
                    l.vector(&n("attn_v.bias"))?,
                ])
            } else {
                None
            };
            let qk_norm = if cfg.qk_norm {
                Some([
                    l.vector(&n("attn_q_norm.weight"))?,
                    l.vector(&n("attn_k_norm.weight"))?,
                ])
            } else {
                None
            };
            layers.push(LayerWeights {
                attn_norm: l.vector(&n("attn_norm.weight"))?,
                wq: l.matrix(&n("attn_q.weight"))?,
                wk: l.matrix(&n("attn_k.weight"))?,
                wv: l.matrix(&n("attn_v.weight"))?,
                qkv_bias,
                qk_norm,
                wo: l.matrix(&n("attn_output.weight"))?,
                ffn_norm: l.vector(&n("ffn_norm.weight"))?,
                w_gate: l.matrix(&n("ffn_gate.weight"))?,
                w_up: l.matrix(&n("ffn_up.weight"))?,
                w_down: l.matrix(&n("ffn_down.weight"))?,
            });
        }
        let output_norm = l.vector("output_norm.weight")?;
        let output = if cfg.tie_embeddings {
            None
        } else {
            Some(l.matrix("output.weight")?)
        };
        Ok(ModelWeights {
            token_embd,
            layers,
            output_norm,
            output,
            mode,
        })
    }

    /// The LM head: `output.weight`, or the token embedding when tied.
    pub fn lm_head(&self) -> &Weight {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}
