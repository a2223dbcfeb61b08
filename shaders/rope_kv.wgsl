// Per-head q/k RMSNorm (qwen3, optional) + RoPE (neox: pairs (i, i + HD/2)) + KV-cache
// write, for one token. One 64-wide workgroup per head: the N_HEADS q heads, then the
// N_KV k heads, then the N_KV v heads.
//
// qkv: [q (N_HEADS·HD) | k (N_KV·HD) | v (N_KV·HD)] f32, the QKV GEMV's output.
// q_out: roped q, f32. Caches: f16 pairs packed in u32, [N_KV][CTX][HD/2]; this step's
// k and v go to position step.pos.
// Angles: f32(pos) · inv_freq[i] (inv_freq = θ^(-2i/HD), computed on the host), reduced
// to [-π, π] before sin/cos so that late positions keep their accuracy.

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

// One head's values after norm and rope (HD ≤ 256, checked by the host).
var<workgroup> head: array<f32, 256>;

// sin and cos of a (possibly large) angle: subtract the nearest multiple of 2π in two
// parts (6.28125 is exact in few bits, so k · 6.28125 is exact for k < 2^16).
fn sin_cos(a: f32) -> vec2<f32> {
    let k = round(a * 0.15915494309189535);
    let r = (a - k * 6.28125) - k * 0.0019353071795864769;
    return vec2<f32>(sin(r), cos(r));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let half = HD / 2u;
    let is_q = h < N_HEADS;
    let is_v = h >= N_HEADS + N_KV;
    let src = h * HD; // q, k and v heads follow each other in qkv
    // Sum of squares for the per-head norm (q and k heads only).
    var ss = 0.0;
    for (var i = lid; i < HD; i += RED_WIDTH) {
        let v = qkv[src + i];
        ss += v * v;
    }
    var inv = 1.0;
    if (QK_NORM) {
        // Every workgroup reduces (uniform control flow); v heads ignore the result.
        inv = 1.0 / sqrt(workgroup_sum(ss, lid) / f32(HD) + EPS);
    }
    let pos = f32(step.pos);
    for (var i = lid; i < half; i += RED_WIDTH) {
        var x0 = qkv[src + i];
        var x1 = qkv[src + i + half];
        if (!is_v) {
            if (QK_NORM) {
                if (is_q) {
                    x0 = x0 * inv * q_norm[i];
                    x1 = x1 * inv * q_norm[i + half];
                } else {
                    x0 = x0 * inv * k_norm[i];
                    x1 = x1 * inv * k_norm[i + half];
                }
            }
            let sc = sin_cos(pos * inv_freq[i]);
            let r0 = x0 * sc.y - x1 * sc.x;
            let r1 = x0 * sc.x + x1 * sc.y;
            x0 = r0;
            x1 = r1;
        }
        if (is_q) {
            q_out[src + i] = x0;
            q_out[src + i + half] = x1;
        } else {
            head[i] = x0;
            head[i + half] = x1;
        }
    }
    workgroupBarrier();
    if (is_q) {
        return;
    }
    // k or v head: pack adjacent pairs as f16 into the cache at this position.
    var kv = h - N_HEADS;
    if (is_v) {
        kv -= N_KV;
    }
    let dst = (kv * CTX + step.pos) * half;
    for (var j = lid; j < half; j += RED_WIDTH) {
        let packed = pack2x16float(vec2<f32>(head[2u * j], head[2u * j + 1u]));
        if (is_v) {
            v_cache[dst + j] = packed;
        } else {
            k_cache[dst + j] = packed;
        }
    }
}
