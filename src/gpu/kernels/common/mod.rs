//! What both kernel families (the GPU designs in `gpu::kernels`, the CPU adapters' in
//! `gpu::kernels::soft`) share, one concern per module: the types a wrapper's callers
//! and every design of it name (specs, inputs, the designs' variant enums and layouts),
//! how Q4 codes are read (buffer or texture, row-major or tile order), and the WGSL
//! fragments their shaders are assembled from. Nothing here imports either family.

pub mod attention;
pub mod attention_prefill;
pub mod gemm;
pub mod gemv;
pub mod gemv_spec;
pub mod q4_codes;
pub mod q4_tiles;
pub mod rope_kv;
pub mod wgsl;
pub mod wgsl_compat;
