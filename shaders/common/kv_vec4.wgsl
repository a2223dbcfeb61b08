// The f16 KV cache read and written four values at a time (two packed f16 pairs, a
// vec2<u32>): shared by the kernels that hold heads as vec4s (attention_group.wgsl,
// soft/attention_lanes.wgsl, soft/attention_prefill_lanes.wgsl).

// Four f16 values (two packed pairs) as a vec4.
fn f16x4(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// Four f32 as two packed f16 pairs (the caches' format).
fn pack4(x: vec4<f32>) -> vec2<u32> {
    return vec2<u32>(pack2x16float(x.xy), pack2x16float(x.zw));
}
