//! The elementwise and reduction operations of the forward pass, on plain f32 slices.
//!
//! Each function states the formula it computes; callers guarantee matching lengths
//! (they are fixed by the validated model config), which the debug asserts document.

/// Dot product with eight independent accumulators, so the compiler can vectorise it
/// (a single running sum is a serial dependency chain it may not reorder). Always inlined,
/// so a caller compiled with wider SIMD (the fast backend's AVX2 attention) widens it.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 8];
    let (a8, a_tail) = a.split_at(a.len() - a.len() % 8);
    let (b8, b_tail) = b.split_at(a8.len());
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// RMSNorm in place: `x ← x / sqrt(mean(x²) + eps) · weight`.
pub fn rmsnorm(x: &mut [f32], weight: &[f32], eps: f32) {
    debug_assert_eq!(x.len(), weight.len());
    let mean_sq = dot(x, x) / x.len() as f32;
    let inv = 1.0 / (mean_sq + eps).sqrt();
    for (v, w) in x.iter_mut().zip(weight) {
        *v = *v * inv * w;
    }
}

/// `out ← rmsnorm(x) · weight` without touching `x`.
pub fn rmsnorm_into(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    out.copy_from_slice(x);
    rmsnorm(out, weight, eps);
}

/// `e^x`, and below `θ^y`, `cos`, `sin`: the `libm` crate's (a port of musl's libm, which is
/// what Rust's std calls on wasm32-unknown-unknown) on every target, not the platform's
/// (glibc rounds some results one ulp apart). So the CPU backend, whose int8 kernels all
/// give the same bits, computes the same numbers natively and in the browser: int8
/// activation quantization turns a one-ulp difference into other tokens within a few steps.
#[inline(always)]
fn exp(x: f32) -> f32 {
    libm::expf(x)
}

/// Softmax in place (max-subtracted for stability).
#[inline(always)]
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// SiLU: `x · sigmoid(x)`.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// `gate ← silu(gate) · up`: the SwiGLU activation, written into `gate`.
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    debug_assert_eq!(gate.len(), up.len());
    for (g, u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// `x ← x + y`.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    debug_assert_eq!(x.len(), y.len());
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Index of the largest value; the first one on ties (as `torch.argmax` and llama.cpp's
/// greedy sampler pick). NaN never wins. `None` for an empty slice.
pub fn argmax(x: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in x.iter().enumerate() {
        if !v.is_nan() && best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

/// One KV head's keys and values in a layer's cache: position `t`'s key is
/// `keys[t * kv_dim + offset..][..head_dim]` (values alike).
pub struct KvHead<'a> {
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub kv_dim: usize,
    pub offset: usize,
}

/// One query head's attention over positions `0..scores.len()`:
/// `out ← Σ_t softmax_t(scale · q·k_t) · v_t` (`out.len() == q.len()`, the head dim).
/// Always inlined, as [`dot`].
#[inline(always)]
pub fn attend_head(q: &[f32], kv: &KvHead, scale: f32, scores: &mut [f32], out: &mut [f32]) {
    let hd = q.len();
    for (t, score) in scores.iter_mut().enumerate() {
        *score = dot(q, &kv.keys[t * kv.kv_dim + kv.offset..][..hd]) * scale;
    }
    softmax(scores);
    out.fill(0.0);
    for (t, &p) in scores.iter().enumerate() {
        let v = &kv.values[t * kv.kv_dim + kv.offset..][..hd];
        for (o, vi) in out.iter_mut().zip(v) {
            *o += p * vi;
        }
    }
}

/// Rotary position embedding, NeoX style (as HF Llama/Qwen and llama.cpp's
/// `LLAMA_ROPE_TYPE_NEOX`): within a head of `d` values, element `i` pairs with element
/// `i + d/2` and the pair is rotated by `pos · θ^(-2i/d)`.
pub struct Rope {
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    /// The rotation for one position. Angles are computed in f64 and rounded once, so
    /// positions far into the context keep full f32 precision.
    pub fn new(head_dim: usize, theta: f32, pos: usize) -> Rope {
        let half = head_dim / 2;
        let (mut cos, mut sin) = (Vec::with_capacity(half), Vec::with_capacity(half));
        for i in 0..half {
            let inv_freq = libm::pow(theta as f64, -((2 * i) as f64) / head_dim as f64);
            let angle = pos as f64 * inv_freq;
            cos.push(libm::cos(angle) as f32);
            sin.push(libm::sin(angle) as f32);
        }
        Rope { cos, sin }
    }

    /// Rotate every head of `x` (`x.len()` a multiple of the head dim) in place.
    pub fn apply(&self, x: &mut [f32]) {
        let half = self.cos.len();
        for head in x.chunks_exact_mut(2 * half) {
            let (lo, hi) = head.split_at_mut(half);
            for i in 0..half {
                let (a, b) = (lo[i], hi[i]);
                lo[i] = a * self.cos[i] - b * self.sin[i];
                hi[i] = a * self.sin[i] + b * self.cos[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_for_odd_lengths() {
        let a: Vec<f32> = (0..21).map(|i| i as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..21).map(|i| (i as f32).sin()).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-5);
    }

    #[test]
    fn rmsnorm_gives_unit_rms_times_weight() {
        let mut x = vec![3.0, -4.0];
        rmsnorm(&mut x, &[1.0, 2.0], 0.0);
        // rms = sqrt((9 + 16) / 2) = 3.5355
        assert!((x[0] - 3.0 / 3.535_534).abs() < 1e-5);
        assert!((x[1] + 8.0 / 3.535_534).abs() < 1e-5);
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let mut x = vec![1.0, 3.0, 2.0, 12.0];
        softmax(&mut x);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[3] > 0.99 && x[1] > x[2] && x[2] > x[0]);
    }

    #[test]
    fn argmax_takes_the_first_maximum_and_ignores_nan() {
        assert_eq!(argmax(&[1.0, 5.0, 5.0, 2.0]), Some(1));
        assert_eq!(argmax(&[f32::NAN, -1.0, f32::NAN]), Some(1));
        assert_eq!(argmax(&[]), None);
    }

    #[test]
    fn rope_rotates_pairs_half_a_head_apart() {
        // head_dim 4: pairs (0, 2) with θ^0 = 1 rad/pos and (1, 3) with θ^-1/2.
        let rope = Rope::new(4, 100.0, 1);
        let mut x = vec![1.0, 1.0, 0.0, 0.0];
        rope.apply(&mut x);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[2] - 1f32.sin()).abs() < 1e-6);
        assert!((x[1] - 0.1f32.cos()).abs() < 1e-6 && (x[3] - 0.1f32.sin()).abs() < 1e-6);
        // position 0 is the identity
        let mut y = vec![0.3, -0.2, 0.7, 0.1];
        Rope::new(4, 100.0, 0).apply(&mut y);
        assert_eq!(y, vec![0.3, -0.2, 0.7, 0.1]);
    }

    #[test]
    fn the_transcendental_functions_are_libm_s_on_every_target() {
        // Inputs where glibc's expf, pow, cos and sin round differently from libm's (on
        // x86-64 Linux); on wasm both sides are the same functions.
        let xs = (0..20_000).map(|i| (i as f32 - 10_000.0) * 1.3e-3);
        for x in xs {
            let silu_libm = x / (1.0 + libm::expf(-x));
            assert_eq!(silu(x).to_bits(), silu_libm.to_bits(), "silu({x})");
        }
        let mut x: Vec<f32> = (0..4096).map(|i| (i as f32 * 0.37).sin() * 9.0).collect();
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let want: Vec<f32> = x.iter().map(|v| libm::expf(v - max)).collect();
        let sum: f32 = want.iter().sum();
        softmax(&mut x);
        for (i, (got, w)) in x.iter().zip(&want).enumerate() {
            assert_eq!(got.to_bits(), (w / sum).to_bits(), "softmax[{i}]");
        }
        let (theta, hd) = (1_000_000.0f32, 128);
        for pos in [1, 7, 500, 4095, 40_000] {
            let rope = Rope::new(hd, theta, pos);
            for i in 0..hd / 2 {
                let angle = pos as f64 * libm::pow(theta as f64, -((2 * i) as f64) / hd as f64);
                assert_eq!(rope.cos[i].to_bits(), (libm::cos(angle) as f32).to_bits());
                assert_eq!(rope.sin[i].to_bits(), (libm::sin(angle) as f32).to_bits());
            }
        }
    }

    #[test]
    fn swiglu_is_silu_gate_times_up() {
        let mut g = vec![0.0, 2.0];
        swiglu(&mut g, &[5.0, 3.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 3.0 * 2.0 / (1.0 + (-2.0f32).exp())).abs() < 1e-6);
    }
}
