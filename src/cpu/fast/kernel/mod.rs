//! The GEMV kernels: `out[r] = W[r] · x` for a run of rows of a Q4 g64 or Q8 g32 matrix
//! ([`Format`], laid out as `packed.rs` says), with `x` prepared as [`Acts`] in int8
//! (per-block quantized: integer dot products) or f32. One scalar version and SIMD versions
//! (AVX2 / AVX-512 VNNI / AVX-VNNI on x86-64, NEON / NEON dotprod on aarch64, simd128 /
//! relaxed SIMD on wasm), chosen once at run time (on wasm at compile time: each web build
//! variant enables its features). For int8 all compute the same exact integer lane sums
//! per group and scale them in one shared order ([`Int8Sum`], [`Q8Sum`]), so every kernel
//! gives the scalar kernel's results bit for bit; for f32 they differ in summation order
//! only. Q8 g32 has SIMD int8 kernels on every ISA (the AVX2 family, NEON, simd128); f32
//! Q8 on NEON and wasm runs the scalar Q8 kernel (the same numbers).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_q8;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_q8;
mod scalar;
mod scalar_q8;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128_q8;
mod timed;

pub use timed::{time_kernels, KernelTiming};

use super::acts::{Acts, Precision};
use super::packed::{Format, Packed};
use crate::quant::{Q4Tensor, GROUP};

/// Code words per Q4 group (8 nibbles each).
const WORDS: usize = GROUP / 8;

/// Most tokens one [`Kernel::tile`] call multiplies: each weight group is loaded and
/// unpacked once for all of them (and each token's activations once per row).
pub const TILE: usize = 4;

/// `rows` consecutive rows of a row-major matrix in `format` of `groups` blocks of 64 per
/// row, from their first code and param words on.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    pub format: Format,
    pub codes: &'a [u32],
    pub params: &'a [u32],
    pub groups: usize,
    pub rows: usize,
}

impl<'a> From<&'a Q4Tensor> for Rows<'a> {
    /// Every row of `w`.
    fn from(w: &'a Q4Tensor) -> Self {
        Rows {
            format: Format::Q4,
            codes: &w.codes,
            params: &w.qparams,
            groups: w.cols / GROUP,
            rows: w.rows,
        }
    }
}

impl<'a> From<&'a Packed> for Rows<'a> {
    /// Every row of `w`.
    fn from(w: &'a Packed) -> Self {
        Rows {
            format: w.format,
            codes: &w.codes,
            params: &w.params,
            groups: w.blocks(),
            rows: w.rows,
        }
    }
}

impl<'a> Rows<'a> {
    /// Rows `first..first + rows` of these.
    pub fn range(self, first: usize, rows: usize) -> Rows<'a> {
        assert!(
            first + rows <= self.rows,
            "rows {first}+{rows} of {}",
            self.rows
        );
        Rows {
            codes: &self.codes[first * self.groups * self.format.words()..],
            params: &self.params[first * self.groups..],
            rows,
            ..self
        }
    }

    /// Panics unless the slices hold `self.rows` rows (a caller bug: the shapes come from
    /// a validated config), before any unchecked access.
    fn check(&self) {
        let (n, groups) = (self.rows, self.groups);
        assert!(
            self.codes.len() >= n * groups * self.format.words(),
            "code words for {n} rows"
        );
        assert!(self.params.len() >= n * groups, "param words for {n} rows");
    }
}

/// An int8 tile kernel for a fixed number of tokens (`Kernel::tile`'s arguments:
/// `out[r·stride + t] ← row r · acts[t]`).
type TileFn = unsafe fn(Rows, &[Acts], &mut [f32], usize);

/// An ISA module's int8 tiles for 1..=TILE tokens.
#[cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_feature = "simd128"
    )),
    allow(unused_macros)
)]
macro_rules! tiles {
    ($isa:ident :: $tile:ident) => {
        [
            $isa::$tile::<1>,
            $isa::$tile::<2>,
            $isa::$tile::<3>,
            $isa::$tile::<4>,
        ]
    };
}

/// Rows computed per pass of the fallback tile (a stack buffer).
const FALLBACK_ROWS: usize = 64;

/// A kernel implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Portable Rust (wasm, and CPUs without the SIMD extensions below).
    Scalar,
    /// x86-64 AVX2 + FMA + F16C: `vpmaddubsw` on 32 nibbles at a time.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 AVX2 kernels with AVX-VNNI `vpdpbusd` dot products (int8; f32 inputs run
    /// the AVX2 kernel).
    #[cfg(target_arch = "x86_64")]
    AvxVnni,
    /// x86-64 AVX2 kernels with AVX-512 VNNI's 512-bit `vpdpbusd` (int8; f32 inputs run
    /// the AVX2 kernel).
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
    /// aarch64 NEON (always present there): `smull`/`sadalp` on 16 nibbles at a time.
    #[cfg(target_arch = "aarch64")]
    Neon,
    /// aarch64 NEON with FEAT_DotProd `sdot` dot products (int8; f32 inputs run the NEON
    /// kernel): Apple M, Cortex-A76 and later.
    #[cfg(target_arch = "aarch64")]
    NeonDotprod,
    /// wasm `simd128` (a compile-time feature: the web build enables it):
    /// `i16x8.extmul` on 16 nibbles at a time.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    Simd128,
    /// wasm relaxed SIMD (the web build variant with the feature `wasm-relaxed-simd`, loaded where
    /// the browser validates it): `i32x4.relaxed_dot_i8x16_i7x16_add_s` (int8; f32 inputs
    /// run the simd128 kernel).
    #[cfg(all(target_arch = "wasm32", feature = "wasm-relaxed-simd"))]
    RelaxedSimd,
}

impl Kernel {
    /// The fastest kernel this CPU runs, or the one named by `POCKETRT_CPU_KERNEL`
    /// (`scalar`, `avx2`, `avx-vnni`, `neon`, ...: to compare kernels end to end) where
    /// this CPU runs it; an unknown or unavailable name is ignored with a warning.
    pub fn best() -> Kernel {
        let available = Self::available();
        if let Ok(name) = std::env::var("POCKETRT_CPU_KERNEL") {
            match available.iter().find(|k| k.name() == name) {
                Some(&k) => return k,
                None => eprintln!(
                    "POCKETRT_CPU_KERNEL={name}: not one of this CPU's kernels {:?}; using the fastest",
                    available.iter().map(|k| k.name()).collect::<Vec<_>>()
                ),
            }
        }
        *available
            .last()
            .expect("the scalar kernel is always available")
    }

    /// Every kernel this CPU runs, slowest first (the scalar one first of all); AVX-512
    /// VNNI before AVX-VNNI: faster as a kernel, but not yet shown faster for the whole
    /// model (docs/ARCHITECTURE.md).
    pub fn available() -> Vec<Kernel> {
        #[allow(unused_mut)]
        let mut v = vec![Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            v.push(Kernel::Avx2);
            if has_avx512_vnni() {
                v.push(Kernel::Avx512Vnni);
            }
            if has_avx_vnni() {
                v.push(Kernel::AvxVnni);
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            v.push(Kernel::Neon);
            if std::arch::is_aarch64_feature_detected!("dotprod") {
                v.push(Kernel::NeonDotprod);
            }
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        v.push(Kernel::Simd128);
        #[cfg(all(target_arch = "wasm32", feature = "wasm-relaxed-simd"))]
        v.push(Kernel::RelaxedSimd);
        v
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => "avx-vnni",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => "avx512-vnni",
            #[cfg(target_arch = "aarch64")]
            Kernel::Neon => "neon",
            #[cfg(target_arch = "aarch64")]
            Kernel::NeonDotprod => "neon-dotprod",
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Kernel::Simd128 => "simd128",
            #[cfg(all(target_arch = "wasm32", feature = "wasm-relaxed-simd"))]
            Kernel::RelaxedSimd => "relaxed-simd",
        }
    }

    /// `out[r] ← row r · acts` for rows `0..out.len()` of `w`: for Q4 g64
    /// `Σ_g scale·d·Σ code·q + min·sum` (int8; f32: `scale·Σ code·x + min·sum`), for Q8
    /// g32 `Σ_g scale·d·Σ code·q` (f32: `scale·Σ code·x`); `acts` must hold exactly
    /// `w.groups` blocks.
    ///
    /// Panics when a slice is shorter than the rows need (a caller bug: the shapes come
    /// from a validated config), before any unchecked access.
    pub fn rows(self, w: Rows, acts: &Acts, out: &mut [f32]) {
        let w = Rows {
            rows: out.len(),
            ..w
        };
        let groups = w.groups;
        assert_eq!(acts.ds.len(), groups, "activation blocks vs row groups");
        let held = match acts.precision {
            Precision::Int8 => acts.q.len(),
            Precision::F32 => acts.x.len(),
        };
        assert_eq!(held, groups * GROUP, "activation values");
        w.check();
        let int8 = acts.precision == Precision::Int8;
        // SAFETY (SIMD arms and tiles): `available()` only offers these kernels when the
        // CPU has the features, and the lengths were checked above.
        if let Some(tile) = self.int8_tile(w.format, 1).filter(|_| int8) {
            unsafe { tile(w, core::slice::from_ref(acts), out, 1) };
            return;
        }
        let (c, p, a) = (w.codes, w.params, acts);
        match (w.format, self, acts.precision) {
            (Format::Q4, Kernel::Scalar, Precision::Int8) => scalar::rows_i8(c, p, groups, a, out),
            (Format::Q4, Kernel::Scalar, Precision::F32) => scalar::rows_f32(c, p, groups, a, out),
            #[cfg(target_arch = "x86_64")]
            (Format::Q4, Kernel::Avx2 | Kernel::AvxVnni | Kernel::Avx512Vnni, Precision::F32) => unsafe {
                avx2::rows_f32(c, p, groups, a, out)
            },
            #[cfg(target_arch = "aarch64")]
            (Format::Q4, Kernel::Neon | Kernel::NeonDotprod, Precision::F32) => unsafe {
                neon::rows_f32(c, p, groups, a, out)
            },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            (Format::Q4, Kernel::Simd128, Precision::F32) => unsafe {
                simd128::rows_f32(c, p, groups, a, out)
            },
            #[cfg(all(target_arch = "wasm32", feature = "wasm-relaxed-simd"))]
            (Format::Q4, Kernel::RelaxedSimd, Precision::F32) => unsafe {
                simd128::rows_f32(c, p, groups, a, out)
            },
            #[cfg(target_arch = "x86_64")]
            (Format::Q8, Kernel::Avx2 | Kernel::AvxVnni | Kernel::Avx512Vnni, Precision::F32) => unsafe {
                avx2_q8::rows_f32(w, a, out)
            },
            // Kernels without a Q8 f32 kernel (NEON, wasm) run the scalar Q8 kernel (int8
            // only where the kernel has no tile: the scalar one).
            (Format::Q8, _, Precision::Int8) => scalar_q8::rows_i8(w, a, out),
            (Format::Q8, _, Precision::F32) => scalar_q8::rows_f32(w, a, out),
            // Int8 Q4 GEMVs on the SIMD kernels are one-token tiles (above).
            #[allow(unreachable_patterns)]
            _ => unreachable!("{} has an int8 tile", self.name()),
        }
    }
}

impl Kernel {
    /// `out[r·stride + t] ← row r · acts[t]` for the rows of `w` and tokens
    /// `t < acts.len() ≤ TILE`, as [`Kernel::rows`] computes each (the same sums, so the
    /// same results up to the order of the f32 additions: none for int8). Int8 on the SIMD
    /// kernels is a true tile: a weight group is unpacked once for every token; elsewhere
    /// (f32, scalar) it runs [`Kernel::rows`] token by token.
    ///
    /// Panics, as `rows` does, when a slice is shorter than the shapes need.
    pub fn tile(self, w: Rows, acts: &[Acts], out: &mut [f32], stride: usize) {
        let (n, rows, groups) = (acts.len(), w.rows, w.groups);
        assert!(
            (1..=TILE).contains(&n) && n <= stride,
            "{n} tokens in a tile"
        );
        if rows == 0 {
            return;
        }
        assert!(
            out.len() > (rows - 1) * stride + n - 1,
            "tile output for {rows} rows"
        );
        let int8 = acts.iter().all(|a| a.precision == Precision::Int8);
        if let Some(tile) = self.int8_tile(w.format, n).filter(|_| int8) {
            w.check();
            for a in acts {
                assert!(
                    a.ds.len() == groups && a.q.len() == groups * GROUP,
                    "activations"
                );
            }
            // SAFETY: `available()` offers the SIMD kernels only where the CPU has their
            // features; every length was checked above.
            unsafe { tile(w, acts, out, stride) };
            return;
        }
        let mut col = [0.0f32; FALLBACK_ROWS];
        for (t, a) in acts.iter().enumerate() {
            for first in (0..rows).step_by(FALLBACK_ROWS) {
                let col = &mut col[..FALLBACK_ROWS.min(rows - first)];
                self.rows(w.range(first, col.len()), a, col);
                for (i, v) in col.iter().enumerate() {
                    out[(first + i) * stride + t] = *v;
                }
            }
        }
    }

    /// The int8 tile kernel for `n` (1..=TILE) tokens of a `format` matrix, where this
    /// kernel has one.
    #[cfg_attr(
        not(any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_feature = "simd128"
        )),
        allow(unused_variables, unreachable_code)
    )]
    fn int8_tile(self, format: Format, n: usize) -> Option<TileFn> {
        let tiles: [TileFn; TILE] = match (format, self) {
            #[cfg(target_arch = "x86_64")]
            (Format::Q4, Kernel::Avx2) => tiles!(avx2::tile_i8),
            #[cfg(target_arch = "x86_64")]
            (Format::Q4, Kernel::AvxVnni) => tiles!(avx2::tile_i8_vnni),
            #[cfg(target_arch = "x86_64")]
            (Format::Q4, Kernel::Avx512Vnni) => tiles!(avx2::tile_i8_avx512_vnni),
            #[cfg(target_arch = "x86_64")]
            (Format::Q8, Kernel::Avx2) => tiles!(avx2_q8::tile_i8),
            #[cfg(target_arch = "x86_64")]
            (Format::Q8, Kernel::AvxVnni) => tiles!(avx2_q8::tile_i8_vnni),
            #[cfg(target_arch = "x86_64")]
            (Format::Q8, Kernel::Avx512Vnni) => tiles!(avx2_q8::tile_i8_avx512_vnni),
            #[cfg(target_arch = "aarch64")]
            (Format::Q4, Kernel::Neon) => tiles!(neon::tile_i8),
            #[cfg(target_arch = "aarch64")]
            (Format::Q4, Kernel::NeonDotprod) => tiles!(neon::tile_i8_sdot),
            #[cfg(target_arch = "aarch64")]
            (Format::Q8, Kernel::Neon) => tiles!(neon_q8::tile_i8),
            #[cfg(target_arch = "aarch64")]
            (Format::Q8, Kernel::NeonDotprod) => tiles!(neon_q8::tile_i8_sdot),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            (Format::Q4, Kernel::Simd128) => tiles!(simd128::tile_i8),
            #[cfg(all(target_arch = "wasm32", feature = "wasm-relaxed-simd"))]
            (Format::Q4, Kernel::RelaxedSimd) => tiles!(simd128::tile_i8_relaxed),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            (Format::Q8, Kernel::Simd128) => tiles!(simd128_q8::tile_i8),
            // Relaxed SIMD's dot product wants one operand in 0..=127: Q8 codes are signed.
            #[cfg(all(target_arch = "wasm32", feature = "wasm-relaxed-simd"))]
            (Format::Q8, Kernel::RelaxedSimd) => tiles!(simd128_q8::tile_i8),
            #[allow(unreachable_patterns)]
            _ => return None,
        };
        Some(tiles[n - 1])
    }
}

/// Whether the CPU has AVX-VNNI (CPUID leaf 7, sub-leaf 1, EAX bit 4; the OS's saving
/// of the AVX registers is checked by the AVX2 detection). Read directly: the
/// `is_x86_feature_detected!("avxvnni")` name needs Rust 1.89, above the crate's MSRV.
#[cfg(target_arch = "x86_64")]
fn has_avx_vnni() -> bool {
    // SAFETY: CPUID leaf 7 exists on every CPU with AVX2 (checked by the caller). The
    // intrinsic is safe from Rust 1.89 on, hence the allowance.
    #[allow(unused_unsafe)]
    let leaf = unsafe { std::arch::x86_64::__cpuid_count(7, 1) };
    leaf.eax & (1 << 4) != 0
}

/// Whether the CPU has AVX-512 F, BW and VNNI (and the OS saves the zmm registers, which
/// the detection checks).
#[cfg(target_arch = "x86_64")]
fn has_avx512_vnni() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// Lanes of the int8 accumulation order all kernels share ([`Int8Sum`]).
pub(crate) const LANES: usize = 4;

/// The lane of code byte `b` (0..32) of a group: the bytes of a 4-byte dot product on
/// 16-byte vectors (`vpdpbusd` lanes folded from 8 to 4, `sdot`, relaxed SIMD's dot).
#[inline(always)]
pub(crate) const fn lane_of(b: usize) -> usize {
    (b / 4) % LANES
}

/// The f32 side of every int8 kernel, in one order, so that all of them give bit-identical
/// results whatever their ISA: a group's exact integer products are summed into
/// [`LANES`] lanes by [`lane_of`]; per group, in order, lane `l` of `acc` gets
/// `+= (scale·d)·isum[l]` (a rounded multiply, then a rounded add: no FMA, which simd128
/// lacks) and `mins += min·sum`; at the end `((acc0 + acc2) + (acc1 + acc3)) + mins`. The
/// scalar kernel runs this; the SIMD kernels hold `acc` in a 4-lane vector.
#[derive(Clone, Copy, Debug, Default)]
struct Int8Sum {
    acc: [f32; LANES],
    mins: f32,
}

impl Int8Sum {
    /// Add one group: `scale_d = scale·d`, `isum` its lanes' `Σ code·q`, `min_sum = min·sum`.
    #[inline(always)]
    fn add(&mut self, scale_d: f32, isum: [i32; LANES], min_sum: f32) {
        for (a, i) in self.acc.iter_mut().zip(isum) {
            *a += scale_d * i as f32;
        }
        self.mins += min_sum;
    }

    #[inline(always)]
    fn finish(self) -> f32 {
        let [a0, a1, a2, a3] = self.acc;
        ((a0 + a2) + (a1 + a3)) + self.mins
    }
}

/// [`Int8Sum`] for a Q8 g32 block of 64: its two groups' exact integer products in eight
/// lanes, lane `l` = code bytes `4l..4l + 4` of both nibble-ordered halves (lanes 0..4 the
/// first group's entries, 4..8 the second's: the eight i32 lanes of an AVX2 dot product);
/// per block, in order, `acc[l] += (scale_{l/4}·d)·isum[l]` (a multiply, then an add), and
/// at the end lanes `l` and `l + 4` added and finished as [`Int8Sum`] with no min term.
#[derive(Clone, Copy, Debug, Default)]
struct Q8Sum {
    acc: [f32; 2 * LANES],
}

impl Q8Sum {
    #[inline(always)]
    fn add(&mut self, scale_d: [f32; 2], isum: [i32; 2 * LANES]) {
        for (l, (a, i)) in self.acc.iter_mut().zip(isum).enumerate() {
            *a += scale_d[l / LANES] * i as f32;
        }
    }

    #[inline(always)]
    fn finish(self) -> f32 {
        let a = self.acc;
        let acc = core::array::from_fn(|l| a[l] + a[l + LANES]);
        Int8Sum { acc, mins: 0.0 }.finish()
    }
}

/// f16 bits (the low 16 of `h`) → f32 with integer operations and one multiply, exact
/// for every finite f16: exponent and mantissa moved into place give the value times
/// 2^-112; multiplying by 2^112 rescales it (and normalizes subnormals); then the sign.
#[cfg_attr(
    not(any(
        target_arch = "aarch64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )),
    allow(dead_code)
)]
#[inline(always)]
fn f16_bits_to_f32(h: u32) -> f32 {
    let two_pow_112 = f32::from_bits((127 + 112) << 23);
    let magnitude = f32::from_bits((h & 0x7FFF) << 13) * two_pow_112;
    f32::from_bits(magnitude.to_bits() | ((h & 0x8000) << 16))
}

#[cfg(test)]
mod tests {
    use super::f16_bits_to_f32;
    use half::f16;

    #[test]
    fn the_integer_f16_unpack_is_exact_for_every_finite_f16() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            if h.is_finite() {
                let got = f16_bits_to_f32(u32::from(bits));
                assert_eq!(got.to_bits(), h.to_f32().to_bits(), "f16 bits {bits:#06x}");
            }
        }
    }
}
