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

/// `v` rounded to the nearest integer, ties to even, for |v| < 2²²: adding and subtracting
/// 1.5·2²³ (plain IEEE arithmetic, so every target rounds alike; no call, so loops over it
/// vectorize, where `f32::round` calls `roundf` on baseline x86-64).
#[inline(always)]
pub(crate) fn round_half_even(v: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0;
    (v + ROUND) - ROUND
}

/// `e^x` within one ulp (`exp_is_within_one_ulp`), in IEEE basic operations only (Cephes'
/// `expf`: `x = n·ln 2 + r`, a degree-7 polynomial in `r`, times `2^n` built from bits), so
/// it gives the same bits on every target, the browser included: int8 activation
/// quantization turns a one-ulp difference into other tokens within a few steps. Free of
/// branches and calls, so loops over it vectorize (a call to `libm::expf` per element was
/// 4% of one-thread decode). Below −86.6 (results under 2.6·10⁻³⁸) it gives 0, above
/// 88.72 infinity.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOW: f32 = -86.6;
    const HIGH: f32 = 88.72;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let xc = x.clamp(LOW, HIGH);
    let n = round_half_even(xc * std::f32::consts::LOG2_E);
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    // Horner's rule over Cephes' coefficients, highest first.
    let p = [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ]
    .iter()
    .fold(1.987_569_2e-4f32, |p, c| p * r + c);
    let y = p * (r * r) + r + 1.0;
    // 2^(n−1), then ·2: n reaches 128 just below HIGH. (n ≥ −125 above LOW.)
    let scale = f32::from_bits(((n as i32 + 126) as u32) << 23);
    let e = y * scale * 2.0;
    if x < LOW {
        0.0
    } else if x > HIGH {
        f32::INFINITY
    } else {
        e
    }
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
    fn exp_is_within_one_ulp() {
        let ulp = |v: f32| f32::from_bits(v.to_bits() + 1) - v;
        let mut worst = 0.0f64;
        for i in 0..2_000_000 {
            let x = -86.6 + (88.72 + 86.6) * (i as f32 / 2_000_000.0);
            let want = (x as f64).exp();
            let err = (exp(x) as f64 - want).abs() / ulp(want as f32) as f64;
            worst = worst.max(err);
        }
        assert!(worst < 1.0, "{worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(silu(-100.0), -0.0);
        assert_eq!(silu(100.0), 100.0);
    }

    #[test]
    fn rope_tables_are_libm_s_on_every_target() {
        // Inputs where glibc's pow, cos and sin round differently from libm's (on x86-64
        // Linux); on wasm both sides are the same functions.
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
