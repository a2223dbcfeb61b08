// Shared by the RoPE kernels (attention.wgsl, attention_group.wgsl, attention_lanes.wgsl,
// rope_kv_prefill.wgsl), so that decode and prefill rotate bit for bit alike: the head
// shape and norm overrides, the QKV output at binding 1 (binding 0: the kernel's step or
// chunk uniform; bindings 2-4: the wrapper's rope_inputs_wgsl) and sin_cos.

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override CTX: u32;
override QK_NORM: bool;
override EPS: f32;

// [q (N_HEADS·HD) | k (N_KV·HD) | v (N_KV·HD)] f32 per token: the QKV GEMV's (GEMM's)
// output.
@group(0) @binding(1) var<storage, read> qkv: array<f32>;

// sin and cos of a (possibly large) angle: subtract the nearest multiple of 2π in two
// parts (6.28125 is exact in few bits, so k · 6.28125 is exact for k < 2^16).
fn sin_cos(a: f32) -> vec2<f32> {
    let k = round(a * 0.15915494309189535);
    let r = (a - k * 6.28125) - k * 0.0019353071795864769;
    return vec2<f32>(sin(r), cos(r));
}
