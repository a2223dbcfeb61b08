//! AVX2 kernels: one group (64 weights, 32 code bytes) per iteration; the low and high
//! nibbles of a 32-byte load meet the two nibble-ordered halves of the activation block.
//! Int8: two `vpmaddubsw` (u8 × i8 → pairs summed in i16: at most 2·15·127 each, never
//! saturating), `vpmaddwd` by 1 widens to 8 i32 lanes; with AVX-VNNI two `vpdpbusd` (four
//! u8 × i8 products summed into each i32 lane) do the same in two instructions instead of
//! four; with AVX-512 VNNI one 512-bit `vpdpbusd` on both nibble halves at once, its
//! two 256-bit halves then added. The 8 i32 lanes are folded to `Int8Sum`'s 4 and scaled in its order (a
//! multiply, then an add), so the results equal the scalar kernel's bit for bit.
//! F32: nibbles widened to f32 eight at a time into FMAs. F16C unpacks (scale, min).
//! The int8 GEMV is the one-token case of the int8 tile (up to `TILE` tokens per weight
//! group, for batched prefill).

use super::super::acts::Acts;
use super::{Rows, WORDS};
use crate::quant::GROUP;
use std::arch::x86_64::*;

/// How far ahead of the group it reads the int8 tile asks for the codes (`prefetcht0`):
/// decode streams every weight from memory once per token, stalled on these loads without
/// the hint (docs/ARCHITECTURE.md, "On the CPU backend", has the measurement).
pub(super) const PREFETCH_BYTES: usize = 2048;

/// `Σ lo·xl + hi·xh` per i32 lane (four byte products each), `xl`/`xh` the 64
/// activation bytes at `x`: `vpmaddubsw` into i16 pairs, widened by `vpmaddwd`.
#[inline(always)]
unsafe fn dot_maddubs(lo: __m256i, hi: __m256i, x: *const i8) -> __m256i {
    let (xl, xh) = load_halves(x);
    let pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

#[inline(always)]
pub(super) unsafe fn load_halves(x: *const i8) -> (__m256i, __m256i) {
    (
        _mm256_loadu_si256(x as *const __m256i),
        _mm256_loadu_si256(x.add(32) as *const __m256i),
    )
}

/// The same sums by two `vpdpbusd` (AVX-VNNI; VEX-encoded, so AVX2 registers suffice).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_vnni(lo: __m256i, hi: __m256i, x: *const i8) -> __m256i {
    let (xl, xh) = load_halves(x);
    vnni(lo, hi, xl, xh)
}

/// `Σ lo·xl + hi·xh` per i32 lane (u8 × i8, four byte products each, summed exactly) by
/// two AVX-VNNI `vpdpbusd`. Written as assembly: the intrinsic and its target feature
/// need Rust 1.89, above the crate's MSRV. (Inlined into the tiles, which have the same
/// target features.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn vnni(lo: __m256i, hi: __m256i, xl: __m256i, xh: __m256i) -> __m256i {
    let mut s = _mm256_setzero_si256();
    core::arch::asm!(
        "{{vex}} vpdpbusd {s}, {lo}, {xl}",
        "{{vex}} vpdpbusd {s}, {hi}, {xh}",
        s = inout(ymm_reg) s,
        lo = in(ymm_reg) lo,
        xl = in(ymm_reg) xl,
        hi = in(ymm_reg) hi,
        xh = in(ymm_reg) xh,
        options(pure, nomem, nostack, preserves_flags),
    );
    s
}

/// The same sums by one 512-bit `vpdpbusd` (AVX-512 VNNI): `[lo, hi]` in one zmm against
/// the 64 activation bytes, then its upper eight lanes (the high nibbles) added to the
/// lower eight. Assembly on the zmm forms of the ymm operands, all within one block (the
/// compiler keeps only their low 256 bits): AVX-512 intrinsics and target features need
/// Rust 1.89, above the crate's MSRV.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_avx512_vnni(lo: __m256i, hi: __m256i, x: *const i8) -> __m256i {
    let s: __m256i;
    core::arch::asm!(
        "vinserti64x4 {c:z}, {lo:z}, {hi:y}, 1",
        "vpxor {s:y}, {s:y}, {s:y}",
        "vpdpbusd {s:z}, {c:z}, zmmword ptr [{x}]",
        "vextracti64x4 {t:y}, {s:z}, 1",
        "vpaddd {s:y}, {s:y}, {t:y}",
        lo = in(ymm_reg) lo,
        hi = in(ymm_reg) hi,
        x = in(reg) x,
        s = out(ymm_reg) s,
        c = out(ymm_reg) _,
        t = out(ymm_reg) _,
        options(pure, readonly, nostack, preserves_flags),
    );
    s
}

/// The int8 tile for one set of target features and group dot product (AVX2 and
/// AVX-VNNI differ only there).
macro_rules! int8_tile {
    ($(#[$doc:meta])* $name:ident, $features:literal, $dot:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub unsafe fn $name<const T: usize>(w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
            let Rows { codes, params, groups, rows, .. } = w;
            let mask = _mm256_set1_epi8(0x0F);
            let q: [*const i8; T] = core::array::from_fn(|t| acts[t].q.as_ptr());
            let ds: [*const [f32; 2]; T] = core::array::from_fn(|t| acts[t].ds.as_ptr());
            for r in 0..rows {
                let c = codes.as_ptr().add(r * groups * WORDS);
                let p = params.as_ptr().add(r * groups);
                let mut acc = [_mm_setzero_ps(); T];
                let mut mins = [_mm_setzero_ps(); T];
                for g in 0..groups {
                    let at = c.add(g * WORDS);
                    _mm_prefetch::<_MM_HINT_T0>(at.wrapping_byte_add(PREFETCH_BYTES) as *const i8);
                    let w = _mm256_loadu_si256(at as *const __m256i);
                    let lo = _mm256_and_si256(w, mask);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(w), mask);
                    let sm = _mm_cvtph_ps(_mm_cvtsi32_si128(*p.add(g) as i32));
                    for t in 0..T {
                        let sums = $dot(lo, hi, q[t].add(g * GROUP));
                        // Lanes k and k + 4 hold bytes 4k.. and 16 + 4k..: Int8Sum's lanes.
                        let sums = _mm_add_epi32(
                            _mm256_castsi256_si128(sums),
                            _mm256_extracti128_si256::<1>(sums),
                        );
                        // [scale, min, 0, 0] · [d, sum, 0, 0]
                        let dsum =
                            _mm_castsi128_ps(_mm_loadl_epi64(ds[t].add(g) as *const __m128i));
                        let prod = _mm_mul_ps(sm, dsum);
                        let scaled = _mm_mul_ps(_mm_cvtepi32_ps(sums), _mm_shuffle_ps::<0>(prod, prod));
                        acc[t] = _mm_add_ps(acc[t], scaled);
                        mins[t] = _mm_add_ps(mins[t], prod);
                    }
                }
                for t in 0..T {
                    out[r * stride + t] = finish4(acc[t], mins[t]);
                }
            }
        }
    };
}

int8_tile!(
    /// The int8 tile: `out[r·stride + t] ← row r · acts[t]` for `T` tokens, each weight
    /// group loaded, unpacked and its (scale, min) converted once for all `T` (`T = 1`:
    /// the GEMV).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; `w` must hold its rows, every `acts[t]`
    /// (`t < T`) `w.groups` int8 blocks, and `out` must reach `(rows − 1)·stride + T`
    /// (checked by `Kernel::tile` and `Kernel::rows`).
    tile_i8,
    "avx2,fma,f16c",
    dot_maddubs
);

int8_tile!(
    /// [`tile_i8`] with AVX-VNNI dot products.
    ///
    /// # Safety
    /// As [`tile_i8`], on a CPU that also has AVX-VNNI.
    tile_i8_vnni,
    "avx2,fma,f16c",
    dot_vnni
);

int8_tile!(
    /// [`tile_i8`] with AVX-512 VNNI dot products (one 512-bit `vpdpbusd` per group and
    /// token).
    ///
    /// # Safety
    /// As [`tile_i8`], on a CPU that also has AVX-512 F and VNNI (with the OS saving the
    /// zmm registers).
    tile_i8_avx512_vnni,
    "avx2,fma,f16c",
    dot_avx512_vnni
);

/// `((acc0 + acc2) + (acc1 + acc3)) + mins[1]`: `Int8Sum`'s finish.
#[inline(always)]
pub(super) unsafe fn finish4(acc: __m128, mins: __m128) -> f32 {
    let s = _mm_add_ps(acc, _mm_movehl_ps(acc, acc));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s) + _mm_cvtss_f32(_mm_shuffle_ps::<1>(mins, mins))
}

/// `Σ acc + mins[1]`.
#[inline(always)]
pub(super) unsafe fn finish(acc: __m256, mins: __m128) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps::<1>(acc));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s) + _mm_cvtss_f32(_mm_shuffle_ps::<1>(mins, mins))
}

/// `acc + Σ nibble·x` over the 32 nibbles of `v` and `x[0..32]`.
#[inline(always)]
unsafe fn fma32(acc: __m256, v: __m256i, x: *const f32) -> __m256 {
    let (a, b) = (_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let widen = |h: __m128i| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h));
    let acc = _mm256_fmadd_ps(widen(a), _mm256_loadu_ps(x), acc);
    let acc = _mm256_fmadd_ps(
        widen(_mm_srli_si128::<8>(a)),
        _mm256_loadu_ps(x.add(8)),
        acc,
    );
    let acc = _mm256_fmadd_ps(widen(b), _mm256_loadu_ps(x.add(16)), acc);
    _mm256_fmadd_ps(
        widen(_mm_srli_si128::<8>(b)),
        _mm256_loadu_ps(x.add(24)),
        acc,
    )
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C; `codes`, `params` and `acts` must hold
/// `out.len()` rows of `groups` groups (checked by `Kernel::rows`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_f32(codes: &[u32], params: &[u32], groups: usize, acts: &Acts, out: &mut [f32]) {
    let mask = _mm256_set1_epi8(0x0F);
    let x = acts.x.as_ptr();
    let ds = acts.ds.as_ptr();
    for (r, o) in out.iter_mut().enumerate() {
        let c = codes.as_ptr().add(r * groups * WORDS);
        let p = params.as_ptr().add(r * groups);
        let mut acc = _mm256_setzero_ps();
        let mut mins = _mm_setzero_ps();
        for g in 0..groups {
            let w = _mm256_loadu_si256(c.add(g * WORDS) as *const __m256i);
            let lo = _mm256_and_si256(w, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(w), mask);
            let xg = x.add(g * GROUP);
            let s = fma32(_mm256_setzero_ps(), lo, xg);
            let s = fma32(s, hi, xg.add(32));
            // [scale, min, 0, 0] · [1, sum, 0, 0]
            let sm = _mm_cvtph_ps(_mm_cvtsi32_si128(*p.add(g) as i32));
            let dsum = _mm_castsi128_ps(_mm_loadl_epi64(ds.add(g) as *const __m128i));
            let prod = _mm_mul_ps(sm, dsum);
            acc = _mm256_fmadd_ps(s, _mm256_broadcastss_ps(prod), acc);
            mins = _mm_add_ps(mins, prod);
        }
        *o = finish(acc, mins);
    }
}
