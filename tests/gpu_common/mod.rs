//! Shared by the GPU tests: one device per test binary (a missing adapter fails the test,
//! it never skips), seeded random data, reference math and error measures.
#![allow(dead_code)]

#[cfg(not(target_arch = "wasm32"))]
pub mod attention_ref;

#[cfg(not(target_arch = "wasm32"))]
use pocketrt::gpu::{LimitsNeeded, ProfiledContext};
#[cfg(not(target_arch = "wasm32"))]
use std::sync::{Arc, OnceLock};

/// The test device (native only). Panics with the typed error's message (naming the fix) when there
/// is no adapter: GPU tests fail rather than skip, with or without POCKETRT_REQUIRE_GPU.
#[cfg(not(target_arch = "wasm32"))]
pub fn gpu() -> &'static Arc<ProfiledContext> {
    static CTX: OnceLock<Arc<ProfiledContext>> = OnceLock::new();
    CTX.get_or_init(|| {
        let required = std::env::var("POCKETRT_REQUIRE_GPU").is_ok_and(|v| v == "1");
        match ProfiledContext::open_blocking(LimitsNeeded::default()) {
            Ok(ctx) => Arc::new(ctx),
            Err(e) => panic!("GPU test without a GPU (POCKETRT_REQUIRE_GPU={required}): {e}"),
        }
    })
}

/// A prefill chunk uniform on the test device saying `count` tokens from position 0.
#[cfg(not(target_arch = "wasm32"))]
pub fn chunk_uniform(count: usize) -> wgpu::Buffer {
    let ctx = gpu();
    let chunk = ctx.uniform("chunk", 16);
    let uniform = pocketrt::gpu::kernels::common::gemm::ChunkUniform {
        start: 0,
        count: count as u32,
        pad: [0; 2],
    };
    ctx.queue
        .write_buffer(&chunk, 0, bytemuck::bytes_of(&uniform));
    chunk
}

/// The test device in every named profile it can run (`ProfiledContext::with_profile`): all
/// of them where it is lavapipe (CI), else at least the ones that need no feature (`gpu`,
/// `swiftshader`); a profile that needs subgroups may be refused there, with its error,
/// never skipped silently (the names that ran are printed).
#[cfg(not(target_arch = "wasm32"))]
pub fn profiles() -> &'static [Arc<ProfiledContext>] {
    use pocketrt::gpu::profile::PROFILE_NAMES;
    static ALL: OnceLock<Vec<Arc<ProfiledContext>>> = OnceLock::new();
    ALL.get_or_init(|| {
        let base = gpu();
        let mut out = vec![];
        for name in PROFILE_NAMES {
            match base.with_profile(name) {
                Ok(ctx) => out.push(Arc::new(ctx)),
                Err(e)
                    if ["lavapipe", "gpu-subgroups"].contains(&name)
                        && base.profile.name != "lavapipe" =>
                {
                    println!("profile {name} not on {}: {e}", base.adapter.name)
                }
                Err(e) => panic!("profile {name} on {}: {e}", base.adapter.name),
            }
        }
        let names: Vec<_> = out.iter().map(|c| c.profile.name).collect();
        println!("profiles on {}: {names:?}", base.adapter.name);
        out
    })
}

/// xorshift64*: reproducible data without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform() * scale).collect()
    }
}

/// max |a - b| and max |b|.
pub fn max_err(got: &[f32], want: &[f32]) -> (f32, f32) {
    assert_eq!(got.len(), want.len(), "length");
    let mut err = 0f32;
    let mut mag = 0f32;
    for (g, w) in got.iter().zip(want) {
        assert!(g.is_finite(), "non-finite GPU value {g}");
        err = err.max((g - w).abs());
        mag = mag.max(w.abs());
    }
    (err, mag)
}

/// Assert max |got - want| ≤ rel · max|want| + abs, and print the measured error.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f32, abs: f32) {
    let (err, mag) = max_err(got, want);
    let tol = rel * mag + abs;
    println!("{what}: max abs err {err:.3e} (max |ref| {mag:.3e}, tolerance {tol:.3e})");
    assert!(
        err <= tol,
        "{what}: max abs err {err:e} > tolerance {tol:e}"
    );
}

/// Relative tolerance of whole-model logits against the oracle: 1e-3 (the f16 KV cache),
/// 4e-3 where kernels on the path compute in f16 (`f16`: the prefill GEMM's f16 tiles or
/// the GPU GEMVs' f16 x, with shader-f16; ≤ 1.8e-3 measured on the fixtures); a wrong
/// kernel or position moves logits by O(max|logit|).
pub fn logits_rel(f16: bool) -> f32 {
    if f16 {
        4e-3
    } else {
        1e-3
    }
}

/// Do the GPU GEMVs of `ctx`'s profile hold x in f16?
#[cfg(not(target_arch = "wasm32"))]
pub fn gemv_f16(ctx: &ProfiledContext) -> bool {
    use pocketrt::gpu::kernels::common::gemv_spec::GemvVariant;
    let f16 = |v: GemvVariant| matches!(v, GemvVariant::GpuRows(g) if g.f16);
    ctx.profile.gemv.roles().iter().any(|(_, v)| f16(*v))
}

/// Reference RMSNorm.
pub fn rmsnorm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + f64::from(eps)).sqrt();
    x.iter()
        .zip(w)
        .map(|(v, g)| (f64::from(*v) * inv) as f32 * g)
        .collect()
}

/// Round through f16 (what the KV cache stores).
pub fn f16_round(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

/// The allowed-token mask buffer of `n` logits (`kernels::argmax::mask_words` layout):
/// flag, then the bits of `allowed`; `None`: unmasked (flag 0, garbage bits that must be
/// ignored).
#[cfg(not(target_arch = "wasm32"))]
pub fn mask_buffer(n: usize, allowed: Option<&dyn Fn(usize) -> bool>) -> Vec<u32> {
    let mut words = vec![0u32; pocketrt::gpu::kernels::argmax::mask_words(n)];
    match allowed {
        Some(f) => {
            words[0] = 1;
            (0..n)
                .filter(|&i| f(i))
                .for_each(|i| words[1 + i / 32] |= 1 << (i % 32));
        }
        None => words[1..].iter_mut().for_each(|w| *w = 0x5555_5555),
    }
    words
}
