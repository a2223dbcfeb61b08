// Decode attention for one query token (GQA), with the per-head q/k RMSNorm (qwen3,
// optional), RoPE (neox: pairs (i, i + HD/2)) and the KV-cache write fused in, split
// along the context (flash-decoding) when the history is long.
//
// Workgroup (h, s) of the grid (N_HEADS, splits) takes q head h and the positions
// [s·SPLIT_LEN, min((s+1)·SPLIT_LEN, pos+1)). Every workgroup norms and ropes its q head
// and the current k and v of its KV head itself (64 values each: cheaper than another
// dispatch), so this step's position comes from workgroup memory and only earlier
// positions are read from the cache; workgroup (first q head of the group, split 0)
// writes k and v to the cache at `pos` (nobody reads that slot during this dispatch).
//
// One split (pos < SPLIT_LEN): out[h] = softmax(q·K/sqrt(HD))·V, normalised.
// Several: out holds per (head, split) the unnormalised Σ p·v (HD values), then the
// split's max score m and Σ p (p = exp(score - m)); attention_combine.wgsl merges them.
// WO_FOLD (attention_wo.wgsl; a const from the wrapper): one split also projects out[h] through its W_o columns
// into parts[h] (with several, the combine kernel does).
//
// qkv: [q (N_HEADS·HD) | k (N_KV·HD) | v (N_KV·HD)] f32, the QKV GEMV's output.
// Caches: f16 pairs packed in u32, [N_KV][CTX][HD/2]. Scores: scratch [N_HEADS][CTX].
// Angles: f32(pos) · inv_freq[i] (inv_freq = θ^(-2i/HD), from the host), reduced to
// [-π, π] before sin/cos so that late positions keep their accuracy.

override SPLIT_LEN: u32;

// `Step` and binding 0 (`step`) come from step.wgsl; the head shape's overrides and qkv
// (binding 1) from rope_common.wgsl.
// Bindings 2-4 (q_norm, k_norm, inv_freq) and their accessors q_norm_at, k_norm_at,
// inv_freq_at come from the wrapper (attention.rs): storage arrays, or uniform arrays of
// vec4 when the W_o fold needs the storage slots (WebGPU allows 8 per stage).
@group(0) @binding(5) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> scores: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;

// This workgroup's q head and its KV head's current k and v (after norm and rope; k and v
// rounded to f16 as the cache stores them). HD ≤ 256, checked by the host.
var<workgroup> q_head: array<f32, 256>;
var<workgroup> k_now: array<f32, 256>;
var<workgroup> v_now: array<f32, 256>;

// sin_cos: rope_common.wgsl.

// 1 / rms of head `src` in qkv (a workgroup reduction: call in uniform control flow).
fn inv_rms(src: u32, lid: u32) -> f32 {
    var ss = 0.0;
    for (var i = lid; i < HD; i += RED_WIDTH) {
        let v = qkv[src + i];
        ss += v * v;
    }
    return 1.0 / sqrt(workgroup_sum(ss, lid) / f32(HD) + EPS);
}

// Pair (i, i + HD/2) of head `src`, normed (factor inv, weights w0/w1) and rotated by sc.
fn norm_rope(src: u32, i: u32, inv: f32, w0: f32, w1: f32, sc: vec2<f32>) -> vec2<f32> {
    var x0 = qkv[src + i];
    var x1 = qkv[src + i + HD / 2u];
    if (QK_NORM) {
        x0 = x0 * inv * w0;
        x1 = x1 * inv * w1;
    }
    return vec2<f32>(x0 * sc.y - x1 * sc.x, x0 * sc.x + x1 * sc.y);
}

// x rounded to f16, as the cache stores it.
fn f16_round(x: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let split = wid.y;
    let splits = nwg.y;
    let group = N_HEADS / N_KV;
    let kv = h / group;
    let half = HD / 2u;
    let pos = step.pos;
    let len = pos + 1u;
    let q_src = h * HD;
    let k_src = (N_HEADS + kv) * HD;
    let v_src = (N_HEADS + N_KV + kv) * HD;

    // Prologue: norm + rope q and k, round k and v to f16.
    var inv_q = 1.0;
    var inv_k = 1.0;
    if (QK_NORM) {
        inv_q = inv_rms(q_src, lid);
        inv_k = inv_rms(k_src, lid);
    }
    let fpos = f32(pos);
    for (var i = lid; i < half; i += RED_WIDTH) {
        let sc = sin_cos(fpos * inv_freq_at(i));
        var wq = vec2<f32>(1.0);
        var wk = vec2<f32>(1.0);
        if (QK_NORM) {
            wq = vec2<f32>(q_norm_at(i), q_norm_at(i + half));
            wk = vec2<f32>(k_norm_at(i), k_norm_at(i + half));
        }
        let q = norm_rope(q_src, i, inv_q, wq.x, wq.y, sc);
        q_head[i] = q.x;
        q_head[i + half] = q.y;
        let k = norm_rope(k_src, i, inv_k, wk.x, wk.y, sc);
        k_now[i] = f16_round(k.x);
        k_now[i + half] = f16_round(k.y);
    }
    for (var i = lid; i < HD; i += RED_WIDTH) {
        v_now[i] = f16_round(qkv[v_src + i]);
    }
    workgroupBarrier();
    let cbase = kv * CTX * half;
    if (h % group == 0u && split == 0u) {
        let dst = cbase + pos * half;
        for (var j = lid; j < half; j += RED_WIDTH) {
            k_cache[dst + j] = pack2x16float(vec2<f32>(k_now[2u * j], k_now[2u * j + 1u]));
            v_cache[dst + j] = pack2x16float(vec2<f32>(v_now[2u * j], v_now[2u * j + 1u]));
        }
    }
    let start = split * SPLIT_LEN;
    if (start >= len) {
        return; // a split past the history (the host sizes the grid, so only in tests)
    }
    let end = min(start + SPLIT_LEN, len);
    // Positions [start, cached_end) come from the cache; pos itself (if in this split) from
    // workgroup memory.
    let cached_end = min(end, pos);
    let has_now = end == len;

    // Keep this head's q in registers as pairs (HD ≤ 256).
    var qv: array<vec2<f32>, 128>;
    var k_dot = 0.0;
    for (var j = 0u; j < half; j++) {
        qv[j] = vec2<f32>(q_head[2u * j], q_head[2u * j + 1u]);
        k_dot += dot(qv[j], vec2<f32>(k_now[2u * j], k_now[2u * j + 1u]));
    }
    let scale = 1.0 / sqrt(f32(HD));
    let sbase = h * CTX;
    var m = -3.4e38;
    for (var t = start + lid; t < end; t += RED_WIDTH) {
        var s = 0.0;
        if (t < cached_end) {
            let row = cbase + t * half;
            for (var j = 0u; j < half; j++) {
                s += dot(qv[j], unpack2x16float(k_cache[row + j]));
            }
        } else {
            s = k_dot;
        }
        s *= scale;
        scores[sbase + t] = s;
        m = max(m, s);
    }
    m = workgroup_max(m, lid);
    var l = 0.0;
    for (var t = start + lid; t < end; t += RED_WIDTH) {
        let e = exp(scores[sbase + t] - m);
        scores[sbase + t] = e;
        l += e;
    }
    l = workgroup_sum(l, lid);
    storageBarrier();
    for (var j = lid; j < half; j += RED_WIDTH) {
        var acc = vec2<f32>(0.0);
        for (var t = start; t < cached_end; t++) {
            acc += scores[sbase + t] * unpack2x16float(v_cache[cbase + t * half + j]);
        }
        if (has_now) {
            acc += scores[sbase + pos] * vec2<f32>(v_now[2u * j], v_now[2u * j + 1u]);
        }
        if (splits == 1u) {
            out[h * HD + 2u * j] = acc.x / l;
            out[h * HD + 2u * j + 1u] = acc.y / l;
            o_head[2u * j] = acc.x / l;
            o_head[2u * j + 1u] = acc.y / l;
        } else {
            let base = (h * splits + split) * (HD + 2u);
            out[base + 2u * j] = acc.x;
            out[base + 2u * j + 1u] = acc.y;
        }
    }
    if (splits > 1u && lid == 0u) {
        let base = (h * splits + split) * (HD + 2u);
        out[base + HD] = m;
        out[base + HD + 1u] = l;
    }
    workgroupBarrier();
    if (WO_FOLD && splits == 1u) {
        project_head(h, lid);
    }
}
