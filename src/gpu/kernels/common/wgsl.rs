//! WGSL fragments that kernels of both families prepend to their own (each stays a file
//! in shaders/common/, assembled by concatenation).

/// The per-step uniform struct and its binding 0, prepended to kernels that read it.
pub(crate) const STEP_WGSL: &str = include_str!("../../../../shaders/common/step.wgsl");
/// A 64-wide workgroup sum / max (prepended to shaders that reduce).
pub(crate) const REDUCE64_WGSL: &str = include_str!("../../../../shaders/common/reduce64.wgsl");
/// The f16 KV cache four values at a time (f16x4, pack4), prepended to the kernels that
/// hold heads as vec4s.
pub(crate) const KV_VEC4_WGSL: &str = include_str!("../../../../shaders/common/kv_vec4.wgsl");
/// The prefill chunk uniform, prepended to the prefill kernels.
pub(crate) const CHUNK_WGSL: &str = include_str!("../../../../shaders/common/chunk.wgsl");

/// The overrides of `GemvSpec::constants` and code unpacking, shared by the GEMVs and
/// GEMMs of both families.
pub(crate) const Q4_COMMON_WGSL: &str = concat!(
    include_str!("../../../../shaders/common/q4_common.wgsl"),
    include_str!("../../../../shaders/common/q4_unpack.wgsl")
);
/// Code unpacking alone (`lo4`, `hi4`), for other kernels reading Q4 codes.
pub(crate) const Q4_UNPACK_WGSL: &str = include_str!("../../../../shaders/common/q4_unpack.wgsl");
/// Q8 code unpacking (`i8x4`, `q8_scale`), for every kernel reading Q8 codes.
pub(crate) const Q8_UNPACK_WGSL: &str = include_str!("../../../../shaders/common/q8_unpack.wgsl");
/// The prefill GEMM designs' shared epilogue (after Q4_COMMON_WGSL).
pub(crate) const GEMM_COMMON_WGSL: &str =
    include_str!("../../../../shaders/common/gemm_q4_common.wgsl");
