//! AVX2 kernels for Q8 g32 (layout: `packed.rs`): one block of 64 codes (two 32-byte
//! loads, in the activations' nibble order) per iteration. Int8: the codes are signed, so
//! each product `w·q` is taken as `|w| · (q signed by w)` (`vpabsb`, `vpsignb`: llama.cpp's
//! `mul_sum_i8_pairs`), an exact u8 × i8 product: two `vpmaddubsw` (at most 2·128·127 per
//! i16, never saturating) each widened by `vpmaddwd`, or two AVX-VNNI `vpdpbusd`, or one
//! AVX-512 VNNI `vpdpbusd` on both halves at once. Lane `l` of the eight i32 lanes holds
//! bytes `4l..4l + 4` of both halves: lanes 0..4 the block's first g32 group, 4..8 its
//! second, scaled by their own scales in [`super::Q8Sum`]'s order, so the results equal
//! the scalar kernel's bit for bit. F32: codes widened to f32 eight at a time into FMAs.

use super::super::acts::Acts;
use super::avx2::{finish, finish4, load_halves, vnni, PREFETCH_BYTES};
use super::Rows;
use crate::quant::GROUP;
use std::arch::x86_64::*;

/// Code words per block.
const WORDS: usize = GROUP / 4;

/// `Σ a0·xl + a1·xh` per i32 lane by `vpmaddubsw` + `vpmaddwd`, each half widened to i32
/// before they are added (two halves' i16 pairs could overflow).
#[inline(always)]
unsafe fn dot_maddubs(a0: __m256i, a1: __m256i, xl: __m256i, xh: __m256i) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    _mm256_add_epi32(
        _mm256_madd_epi16(_mm256_maddubs_epi16(a0, xl), ones),
        _mm256_madd_epi16(_mm256_maddubs_epi16(a1, xh), ones),
    )
}

/// The same sums by one 512-bit `vpdpbusd` (AVX-512 VNNI) on `[a0, a1]` and `[xl, xh]`,
/// its upper eight lanes then added to the lower eight (assembly for the MSRV, as
/// `avx2::dot_avx512_vnni`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_avx512_vnni(a0: __m256i, a1: __m256i, xl: __m256i, xh: __m256i) -> __m256i {
    let s: __m256i;
    core::arch::asm!(
        "vinserti64x4 {c:z}, {a0:z}, {a1:y}, 1",
        "vinserti64x4 {x:z}, {xl:z}, {xh:y}, 1",
        "vpxor {s:y}, {s:y}, {s:y}",
        "vpdpbusd {s:z}, {c:z}, {x:z}",
        "vextracti64x4 {t:y}, {s:z}, 1",
        "vpaddd {s:y}, {s:y}, {t:y}",
        a0 = in(ymm_reg) a0,
        a1 = in(ymm_reg) a1,
        xl = in(ymm_reg) xl,
        xh = in(ymm_reg) xh,
        s = out(ymm_reg) s,
        c = out(ymm_reg) _,
        x = out(ymm_reg) _,
        t = out(ymm_reg) _,
        options(pure, nomem, nostack, preserves_flags),
    );
    s
}

/// The Q8 int8 tile for one group dot product (the kernels differ only there).
macro_rules! q8_tile {
    ($(#[$doc:meta])* $name:ident, $dot:ident) => {
        $(#[$doc])*
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name<const T: usize>(w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
            let Rows { codes, params, groups, rows, .. } = w;
            let q: [*const i8; T] = core::array::from_fn(|t| acts[t].q.as_ptr());
            let ds: [*const [f32; 2]; T] = core::array::from_fn(|t| acts[t].ds.as_ptr());
            let halves = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
            for r in 0..rows {
                let c = codes.as_ptr().add(r * groups * WORDS);
                let p = params.as_ptr().add(r * groups);
                let mut acc = [_mm256_setzero_ps(); T];
                for g in 0..groups {
                    let at = c.add(g * WORDS);
                    _mm_prefetch::<_MM_HINT_T0>(at.wrapping_byte_add(PREFETCH_BYTES) as *const i8);
                    let w0 = _mm256_loadu_si256(at as *const __m256i);
                    let w1 = _mm256_loadu_si256(at.add(8) as *const __m256i);
                    let (a0, a1) = (_mm256_abs_epi8(w0), _mm256_abs_epi8(w1));
                    // [s0 ×4, s1 ×4]
                    let s = _mm_cvtph_ps(_mm_cvtsi32_si128(*p.add(g) as i32));
                    let s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s), halves);
                    for t in 0..T {
                        let (xl, xh) = load_halves(q[t].add(g * GROUP));
                        let (xl, xh) = (_mm256_sign_epi8(xl, w0), _mm256_sign_epi8(xh, w1));
                        let sums = $dot(a0, a1, xl, xh);
                        let sd = _mm256_mul_ps(s, _mm256_set1_ps((*ds[t].add(g))[0]));
                        let scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), sd);
                        acc[t] = _mm256_add_ps(acc[t], scaled);
                    }
                }
                for t in 0..T {
                    let a = acc[t];
                    let folded = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
                    out[r * stride + t] = finish4(folded, _mm_setzero_ps());
                }
            }
        }
    };
}

q8_tile!(
    /// The Q8 int8 tile: `out[r·stride + t] ← row r · acts[t]` for `T` tokens, each
    /// block's codes loaded and made unsigned once for all `T` (`T = 1`: the GEMV).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; `w` must hold its rows, every `acts[t]`
    /// (`t < T`) `w.groups` int8 blocks, and `out` must reach `(rows − 1)·stride + T`
    /// (checked by `Kernel::tile` and `Kernel::rows`).
    tile_i8,
    dot_maddubs
);

q8_tile!(
    /// [`tile_i8`] with AVX-VNNI dot products.
    ///
    /// # Safety
    /// As [`tile_i8`], on a CPU that also has AVX-VNNI.
    tile_i8_vnni,
    vnni
);

q8_tile!(
    /// [`tile_i8`] with AVX-512 VNNI dot products.
    ///
    /// # Safety
    /// As [`tile_i8`], on a CPU that also has AVX-512 F, BW and VNNI (with the OS saving
    /// the zmm registers).
    tile_i8_avx512_vnni,
    dot_avx512_vnni
);

/// `acc + Σ code·x` over the 16 codes at `c` and `x[0..16]`.
#[inline(always)]
unsafe fn fma16(acc: __m256, c: *const u32, x: *const f32) -> __m256 {
    let widen = |p: *const u32| {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i)))
    };
    let acc = _mm256_fmadd_ps(widen(c), _mm256_loadu_ps(x), acc);
    _mm256_fmadd_ps(widen(c.add(2)), _mm256_loadu_ps(x.add(8)), acc)
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C; `w` and `acts` must hold `out.len()` rows of
/// `w.groups` blocks (checked by `Kernel::rows`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows_f32(w: Rows, acts: &Acts, out: &mut [f32]) {
    let x = acts.x.as_ptr();
    for (r, o) in out.iter_mut().enumerate() {
        let c = w.codes.as_ptr().add(r * w.groups * WORDS);
        let p = w.params.as_ptr().add(r * w.groups);
        let mut acc = _mm256_setzero_ps();
        for g in 0..w.groups {
            let (cg, xg) = (c.add(g * WORDS), x.add(g * GROUP));
            // Entries {0..16, 32..48}: the first g32 group; {16..32, 48..64}: the second.
            let first = fma16(fma16(_mm256_setzero_ps(), cg, xg), cg.add(8), xg.add(32));
            let second = fma16(
                fma16(_mm256_setzero_ps(), cg.add(4), xg.add(16)),
                cg.add(12),
                xg.add(48),
            );
            let s = _mm_cvtph_ps(_mm_cvtsi32_si128(*p.add(g) as i32));
            acc = _mm256_fmadd_ps(first, _mm256_broadcastss_ps(s), acc);
            acc = _mm256_fmadd_ps(
                second,
                _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s), _mm256_set1_epi32(1)),
                acc,
            );
        }
        *o = finish(acc, _mm_setzero_ps());
    }
}
