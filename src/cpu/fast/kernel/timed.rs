//! The kernel chosen by timing on this CPU: every SIMD kernel it runs multiplies one of the
//! model's own matrices, as decode (the GEMV) and prefill (the `TILE`-token tile) do, and the
//! fastest is kept. CPUID says which kernels a CPU runs, not which is fastest there: on an
//! AVX-512 VNNI Xeon the AVX2 tile measured faster than the 512-bit one (docs/ARCHITECTURE.md).
//! Every int8 kernel gives the scalar kernel's results bit for bit, and the f32 paths and
//! the attention they pick are shared within an ISA, so the choice changes speed only,
//! never a result.

use super::super::acts::{Acts, Precision};
use super::{Kernel, Rows, TILE};
use web_time::Instant;

/// Rows of the sample timed (the first rows of the matrix): ~1 MB of Q4, a few of Q8.
const SAMPLE_ROWS: usize = 2048;

/// Alternating rounds at load (each kernel timed once per round; the best round counts).
const LOAD_ROUNDS: usize = 5;

/// One kernel's time on a matrix, each the best of the rounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelTiming {
    pub kernel: Kernel,
    /// The one-token GEMV (decode), µs.
    pub gemv_us: f64,
    /// The `TILE`-token tile (prefill), µs per token.
    pub tile_us_per_token: f64,
}

impl KernelTiming {
    /// What the choice minimizes: decode's and prefill's per-token cost alike.
    pub fn score(&self) -> f64 {
        self.gemv_us + self.tile_us_per_token
    }
}

/// Int8 activations for `TILE` tokens of `cols` values (a fixed spread of magnitudes).
fn sample_acts(cols: usize) -> Vec<Acts> {
    (0..TILE)
        .map(|t| {
            let x: Vec<f32> = (0..cols)
                .map(|i| ((i * 7 + t * 13) % 29) as f32 - 14.0)
                .collect();
            Acts::new(Precision::Int8, &x)
        })
        .collect()
}

/// Each kernel's GEMV and tile on `w` on this thread: `rounds` rounds of `calls` calls of
/// each, the kernels alternating within a round (a shared machine's load varies), the best
/// round kept.
pub fn time_kernels(kernels: &[Kernel], w: Rows, rounds: usize, calls: usize) -> Vec<KernelTiming> {
    let acts = sample_acts(w.groups * crate::quant::GROUP);
    let mut out = vec![0.0f32; w.rows * TILE];
    let mut best = vec![[f64::INFINITY; 2]; kernels.len()];
    for _ in 0..rounds.max(1) {
        for (k, kernel) in kernels.iter().enumerate() {
            for (i, n) in [1, TILE].into_iter().enumerate() {
                let t = Instant::now();
                for _ in 0..calls.max(1) {
                    kernel.tile(w, &acts[..n], &mut out, TILE);
                }
                let us = t.elapsed().as_secs_f64() * 1e6 / (calls.max(1) * n) as f64;
                best[k][i] = best[k][i].min(us);
            }
        }
    }
    kernels
        .iter()
        .zip(best)
        .map(|(&kernel, [gemv_us, tile_us_per_token])| KernelTiming {
            kernel,
            gemv_us,
            tile_us_per_token,
        })
        .collect()
}

impl Kernel {
    /// The kernel for a model whose typical matrix is `w`: the one `POCKETRT_CPU_KERNEL`
    /// names where set (as [`Kernel::best`]); else, where this CPU runs more than one SIMD
    /// kernel, the fastest of them on `w`'s first rows (a few milliseconds; with the
    /// timings); else [`Kernel::best`].
    pub fn fastest_for(w: Rows) -> (Kernel, Vec<KernelTiming>) {
        let simd: Vec<Kernel> = Self::available()
            .into_iter()
            .filter(|&k| k != Kernel::Scalar)
            .collect();
        if std::env::var_os("POCKETRT_CPU_KERNEL").is_some() || simd.len() < 2 || w.rows == 0 {
            return (Self::best(), Vec::new());
        }
        let sample = w.range(0, w.rows.min(SAMPLE_ROWS));
        // A warm-up pass (pages, caches, clocks), then the timed rounds.
        time_kernels(&simd, sample, 1, 1);
        let timings = time_kernels(&simd, sample, LOAD_ROUNDS, 2);
        let fastest = timings
            .iter()
            .min_by(|a, b| a.score().total_cmp(&b.score()))
            .map_or_else(Self::best, |t| t.kernel);
        (fastest, timings)
    }
}
