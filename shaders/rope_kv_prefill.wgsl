// The decode attention's q/k part, batched for prefill: per-head q/k RMSNorm (qwen3,
// optional) + RoPE (neox) + KV-cache write for every token of the chunk. One invocation
// per (token, head) — the q heads, then the k heads, then the v heads of token t — with
// no workgroup memory and no barriers: a head is only HD values.
//
// qkv: [count][N_HEADS·HD | N_KV·HD | N_KV·HD] f32 (the QKV GEMM's output); q_out:
// [count][N_HEADS·HD] roped q. Token t sits at position chunk.start + t. Caches as in
// the decode kernels: f16 pairs packed in u32, [N_KV][CTX][HD/2].

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl; the head shape's overrides and
// qkv (binding 1) from rope_common.wgsl.
// Bindings 2-4 (q_norm, k_norm, inv_freq) and their accessors NAME_at(i): the wrapper's
// (rope_inputs_wgsl).
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;

// sin_cos: rope_common.wgsl.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let heads = N_HEADS + 2u * N_KV;
    let idx = (wid.x + wid.y * nwg.x) * 64u + lid;
    let t = idx / heads;
    let h = idx % heads;
    if (t >= chunk.count) {
        return;
    }
    let half = HD / 2u;
    let is_q = h < N_HEADS;
    let is_v = h >= N_HEADS + N_KV;
    let src = t * heads * HD + h * HD;
    var head: array<f32, 256>;
    var ss = 0.0;
    for (var i = 0u; i < HD; i++) {
        let v = qkv[src + i];
        head[i] = v;
        ss += v * v;
    }
    let inv = 1.0 / sqrt(ss / f32(HD) + EPS);
    let pos = chunk.start + t;
    if (!is_v) {
        for (var i = 0u; i < half; i++) {
            var x0 = head[i];
            var x1 = head[i + half];
            if (QK_NORM) {
                if (is_q) {
                    x0 = x0 * inv * q_norm_at(i);
                    x1 = x1 * inv * q_norm_at(i + half);
                } else {
                    x0 = x0 * inv * k_norm_at(i);
                    x1 = x1 * inv * k_norm_at(i + half);
                }
            }
            let sc = sin_cos(f32(pos) * inv_freq_at(i));
            head[i] = x0 * sc.y - x1 * sc.x;
            head[i + half] = x0 * sc.x + x1 * sc.y;
        }
    }
    if (is_q) {
        let dst = t * N_HEADS * HD + h * HD;
        for (var i = 0u; i < HD; i++) {
            q_out[dst + i] = head[i];
        }
        return;
    }
    var kv = h - N_HEADS;
    if (is_v) {
        kv -= N_KV;
    }
    let dst = (kv * CTX + pos) * half;
    for (var j = 0u; j < half; j++) {
        let packed = pack2x16float(vec2<f32>(head[2u * j], head[2u * j + 1u]));
        if (is_v) {
            v_cache[dst + j] = packed;
        } else {
            k_cache[dst + j] = packed;
        }
    }
}
