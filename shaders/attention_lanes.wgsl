// Decode attention for one query token (GQA) over the f16 KV cache, the CPU-adapter
// design (lavapipe, SwiftShader): no workgroup memory, no barriers, split along the
// context (flash-decoding), with the per-head q/k RMSNorm (qwen3, optional), RoPE (neox:
// pairs (i, i + HD/2)) and this step's KV write fused in.
//
// On CPU adapters every storage load is done lane by lane (~20 cycles per 4 bytes per
// invocation on lavapipe), so loads per multiply-add set the speed: one invocation per
// (split, KV head) computes all GROUP = N_HEADS / N_KV q heads that share the KV head, so
// each key and value loaded serves GROUP heads (the workgroup design, attention.wgsl,
// loads every key once per q head). Invocation `split` of KV head `kv` walks positions
// [split·SPLIT_LEN, min((split+1)·SPLIT_LEN, pos+1)) with an online softmax; 8 splits per
// workgroup (one SIMD batch), KV heads along y.
//
// Every invocation norms and ropes its group's q heads from qkv itself (state_init: a few
// hundred operations per head, against SPLIT_LEN keys of GROUP heads each), and the one
// whose split holds this step's position first writes the KV head's k (normed, roped) and
// v to the cache there, then reads them back like any other key: no other invocation
// reads that position.
//
// One split (pos < SPLIT_LEN): out = softmax(q·K/sqrt(HD))·V, normalised, per head.
// Several: partials per (head, split) hold the unnormalised Σ p·v (HD values), then the
// split's max score m and Σ p, and attention_combine.wgsl merges them. SPLIT_LEN stays far
// below mesa's loop limiter (65,535 loop iterations per invocation, then loops end
// silently).
//
// State, state_init, state_step, state_store and state_store_partial: the wrapper's
// generated code (lanes_state.rs); f16x4, softmax_step: attention_lanes_common.wgsl;
// sin_cos: rope_common.wgsl. qkv: [q (N_HEADS·HD) | k (N_KV·HD) | v (N_KV·HD)] f32, the
// QKV GEMV's output; out: N_HEADS·HD f32. Caches: [N_KV][CTX][HD/2] f16 pairs, read and
// written as vec2<u32> (4 values). HD: a multiple of 4. Angles: f32(pos) · inv_freq[i]
// (inv_freq = θ^(-2i/HD), computed on the host).

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override CTX: u32;
override SPLIT_LEN: u32;
override QK_NORM: bool;
override EPS: f32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> q_norm: array<f32>;
@group(0) @binding(3) var<storage, read> k_norm: array<f32>;
@group(0) @binding(4) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> partials: array<f32>;

// The RMSNorm factor of the head at `src` in qkv (1 without QK_NORM).
fn norm_factor(src: u32) -> f32 {
    if (!QK_NORM) {
        return 1.0;
    }
    var ss = 0.0;
    for (var i = 0u; i < HD; i++) {
        let v = qkv[src + i];
        ss += v * v;
    }
    return 1.0 / sqrt(ss / f32(HD) + EPS);
}

// Element e of the head at `src` in qkv, normed (factor inv, q or k weights) and rotated:
// element i of the first half pairs with i + HD/2.
fn rope_elem(src: u32, e: u32, inv: f32, is_q: bool) -> f32 {
    let half = HD / 2u;
    let i = e % half;
    var x0 = qkv[src + i];
    var x1 = qkv[src + i + half];
    if (QK_NORM) {
        var w0 = k_norm[i];
        var w1 = k_norm[i + half];
        if (is_q) {
            w0 = q_norm[i];
            w1 = q_norm[i + half];
        }
        x0 = x0 * inv * w0;
        x1 = x1 * inv * w1;
    }
    let sc = sin_cos(f32(step.pos) * inv_freq[i]);
    if (e < half) {
        return x0 * sc.y - x1 * sc.x;
    }
    return x0 * sc.x + x1 * sc.y;
}

// Elements 4d..4d+3 of the head at `src`, normed and roped (state_init reads the group's
// q heads so: lanes_state.rs).
fn rope4(src: u32, d: u32, inv: f32, is_q: bool) -> vec4<f32> {
    let e = 4u * d;
    return vec4<f32>(rope_elem(src, e, inv, is_q), rope_elem(src, e + 1u, inv, is_q),
                     rope_elem(src, e + 2u, inv, is_q), rope_elem(src, e + 3u, inv, is_q));
}

// This step's k (normed, roped) and v of KV head kv, as f16, to the caches at vec2 `at`.
fn write_kv(kv: u32, at: u32) {
    let k_src = (N_HEADS + kv) * HD;
    let v_src = (N_HEADS + N_KV + kv) * HD;
    let inv = norm_factor(k_src);
    for (var d = 0u; d < HD / 4u; d++) {
        let k = rope4(k_src, d, inv, false);
        k_cache[at + d] = vec2<u32>(pack2x16float(k.xy), pack2x16float(k.zw));
        let v = v_src + 4u * d;
        v_cache[at + d] = vec2<u32>(pack2x16float(vec2<f32>(qkv[v], qkv[v + 1u])),
                                    pack2x16float(vec2<f32>(qkv[v + 2u], qkv[v + 3u])));
    }
}

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kv = wid.y;
    let hd4 = HD / 4u;
    let group = N_HEADS / N_KV;
    let len = step.pos + 1u;
    let splits = (len + SPLIT_LEN - 1u) / SPLIT_LEN;
    let split = wid.x * 8u + lid;
    if (split >= splits) {
        return;
    }
    // vec4 index of the group's first head in q and out.
    let row = kv * group * hd4;
    var st = state_init(row, 1.0 / sqrt(f32(HD)));
    // Key j's vec4 d (two u32 pairs) is at (kv · CTX + j) · hd4 + d.
    let cbase = kv * CTX * hd4;
    if (split == splits - 1u) {
        write_kv(kv, cbase + step.pos * hd4);
    }
    let end = min((split + 1u) * SPLIT_LEN, len);
    for (var j = split * SPLIT_LEN; j < end; j++) {
        st = state_step(st, cbase + j * hd4, true);
    }
    if (splits == 1u) {
        state_store(row, st);
    } else {
        state_store_partial(kv * group, split, splits, st);
    }
}
