// A head of the QKV output normed and roped four elements at a time, shared by the decode
// attention kernels that hold heads as vec4s (attention_group.wgsl,
// soft/attention_lanes.wgsl). Needs `step` (step.wgsl), qkv, HD, QK_NORM and sin_cos
// (rope_common.wgsl) and the accessors q_norm_at, k_norm_at, inv_freq_at (the wrapper's
// rope_inputs_wgsl). Angles: f32(pos) · inv_freq[i], as every RoPE kernel forms them.

// Element e of the head at `src` in qkv, normed (factor inv, q or k weights) and rotated:
// element i of the first half pairs with i + HD/2.
fn rope_elem(src: u32, e: u32, inv: f32, is_q: bool) -> f32 {
    let half = HD / 2u;
    let i = e % half;
    var x0 = qkv[src + i];
    var x1 = qkv[src + i + half];
    if (QK_NORM) {
        var w0 = k_norm_at(i);
        var w1 = k_norm_at(i + half);
        if (is_q) {
            w0 = q_norm_at(i);
            w1 = q_norm_at(i + half);
        }
        x0 = x0 * inv * w0;
        x1 = x1 * inv * w1;
    }
    let sc = sin_cos(f32(step.pos) * inv_freq_at(i));
    if (e < half) {
        return x0 * sc.y - x1 * sc.x;
    }
    return x0 * sc.x + x1 * sc.y;
}

// Elements 4d..4d+3 of the head at `src`, normed and roped.
fn rope4(src: u32, d: u32, inv: f32, is_q: bool) -> vec4<f32> {
    let e = 4u * d;
    return vec4<f32>(rope_elem(src, e, inv, is_q), rope_elem(src, e + 1u, inv, is_q),
                     rope_elem(src, e + 2u, inv, is_q), rope_elem(src, e + 3u, inv, is_q));
}

// Elements 4d..4d+3 of the head at `src` in qkv, as they are.
fn qkv4(src: u32, d: u32) -> vec4<f32> {
    let e = src + 4u * d;
    return vec4<f32>(qkv[e], qkv[e + 1u], qkv[e + 2u], qkv[e + 3u]);
}
