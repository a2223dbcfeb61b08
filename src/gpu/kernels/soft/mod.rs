//! The kernel designs that exist for CPU-emulated adapters only (the `lavapipe` and
//! `swiftshader` device profiles: `gpu::profile`). There every storage-buffer load goes
//! lane by lane and barriers are very expensive, so these designs avoid workgroup memory
//! and barriers ("lanes": one invocation per row, head or query batch) and read the Q4
//! codes from textures (`code_texture`). They are correctness devices' designs: every one
//! is checked against the CPU oracle, none is tuned for real GPUs. They never import the
//! GPU designs (the modules of `gpu::kernels`), only what both families share
//! (`gpu::kernels::common` and the pipeline plumbing of `gpu::kernels`);
//! `gpu::forward::designs` picks them where the profile says (tests/kernel_families.rs).

pub mod attention_lanes;
pub mod attention_prefill_lanes;
pub mod code_texture;
pub mod gemm_q4_lanes;
pub mod gemv_rows;
pub(crate) mod lanes_state;
pub mod q4_tiles;
