// Shared by the RoPE kernels (attention.wgsl, attention_lanes.wgsl,
// rope_kv_prefill.wgsl), so that decode and prefill rotate bit for bit alike.

// sin and cos of a (possibly large) angle: subtract the nearest multiple of 2π in two
// parts (6.28125 is exact in few bits, so k · 6.28125 is exact for k < 2^16).
fn sin_cos(a: f32) -> vec2<f32> {
    let k = round(a * 0.15915494309189535);
    let r = (a - k * 6.28125) - k * 0.0019353071795864769;
    return vec2<f32>(sin(r), cos(r));
}
