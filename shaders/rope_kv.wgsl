// Per-head q/k RMSNorm (qwen3, optional) + RoPE (neox: pairs (i, i + HD/2)) + KV-cache
// write, for one token: one invocation per head (the N_HEADS q heads, then the N_KV k
// heads, then the N_KV v heads), 8 per workgroup, no workgroup memory and no barriers.
// The CPU-adapter design: decode attention runs it as a kernel of its own before
// attention_lanes.wgsl (on GPUs attention.wgsl fuses the same work), and on CPU adapters
// a 64-wide workgroup's reductions and barriers cost more than one lane doing a head.
//
// qkv: [q (N_HEADS·HD) | k (N_KV·HD) | v (N_KV·HD)] f32, the QKV GEMV's output.
// q_out: roped q, f32. Caches: f16 pairs packed in u32, [N_KV][CTX][HD/2]; this step's
// k and v go to position step.pos.
// Angles: f32(pos) · inv_freq[i] (inv_freq = θ^(-2i/HD), computed on the host), reduced
// to [-π, π] before sin/cos (rope_common.wgsl) so that late positions keep their accuracy.

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override CTX: u32;
override QK_NORM: bool;
override EPS: f32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> q_norm: array<f32>;
@group(0) @binding(3) var<storage, read> k_norm: array<f32>;
@group(0) @binding(4) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;

// Norm weight i of a q head (else a k head).
fn norm_w(is_q: bool, i: u32) -> f32 {
    if (is_q) {
        return q_norm[i];
    }
    return k_norm[i];
}

// Element e of the head at `src` in qkv, normed (factor inv) and rotated: element i of
// the first half pairs with i + HD/2.
fn rope_elem(src: u32, e: u32, inv: f32, is_q: bool, pos: f32) -> f32 {
    let half = HD / 2u;
    let i = e % half;
    var x0 = qkv[src + i];
    var x1 = qkv[src + i + half];
    if (QK_NORM) {
        x0 = x0 * inv * norm_w(is_q, i);
        x1 = x1 * inv * norm_w(is_q, i + half);
    }
    let sc = sin_cos(pos * inv_freq[i]);
    if (e < half) {
        return x0 * sc.y - x1 * sc.x;
    }
    return x0 * sc.x + x1 * sc.y;
}

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x * 8u + lid;
    if (h >= N_HEADS + 2u * N_KV) {
        return;
    }
    let half = HD / 2u;
    let src = h * HD; // q, k and v heads follow each other in qkv
    if (h >= N_HEADS + N_KV) {
        // v head: adjacent pairs as f16 into the cache at this position.
        let dst = ((h - N_HEADS - N_KV) * CTX + step.pos) * half;
        for (var j = 0u; j < half; j++) {
            v_cache[dst + j] = pack2x16float(vec2<f32>(qkv[src + 2u * j], qkv[src + 2u * j + 1u]));
        }
        return;
    }
    let is_q = h < N_HEADS;
    var inv = 1.0;
    if (QK_NORM) {
        var ss = 0.0;
        for (var i = 0u; i < HD; i++) {
            let v = qkv[src + i];
            ss += v * v;
        }
        inv = 1.0 / sqrt(ss / f32(HD) + EPS);
    }
    let pos = f32(step.pos);
    if (is_q) {
        for (var e = 0u; e < HD; e++) {
            q_out[src + e] = rope_elem(src, e, inv, true, pos);
        }
        return;
    }
    // k head: cache word j packs elements 2j and 2j + 1.
    let dst = ((h - N_HEADS) * CTX + step.pos) * half;
    for (var j = 0u; j < half; j++) {
        let k0 = rope_elem(src, 2u * j, inv, false, pos);
        let k1 = rope_elem(src, 2u * j + 1u, inv, false, pos);
        k_cache[dst + j] = pack2x16float(vec2<f32>(k0, k1));
    }
}
