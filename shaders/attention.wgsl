// Decode attention for one query token over the KV cache (GQA): for each q head h,
// out[h] = softmax(q_h · K[0..=pos] / sqrt(HD)) · V[0..=pos], K and V from KV head
// h / (N_HEADS / N_KV). One 64-wide workgroup per q head. Scores live in a storage
// scratch buffer [N_HEADS][CTX] (the context does not fit in workgroup memory).

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override CTX: u32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<u32>;
@group(0) @binding(3) var<storage, read> v_cache: array<u32>;
@group(0) @binding(4) var<storage, read_write> scores: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let kv = h / (N_HEADS / N_KV);
    let half = HD / 2u;
    let len = step.pos + 1u;
    let scale = 1.0 / sqrt(f32(HD));
    let sbase = h * CTX;
    let cbase = kv * CTX * half;
    // Keep this head's q in registers as pairs (HD ≤ 256).
    var qv: array<vec2<f32>, 128>;
    for (var j = 0u; j < half; j++) {
        qv[j] = vec2<f32>(q[h * HD + 2u * j], q[h * HD + 2u * j + 1u]);
    }
    var m = -3.4e38;
    for (var t = lid; t < len; t += RED_WIDTH) {
        var s = 0.0;
        let row = cbase + t * half;
        for (var j = 0u; j < half; j++) {
            s += dot(qv[j], unpack2x16float(k_cache[row + j]));
        }
        s *= scale;
        scores[sbase + t] = s;
        m = max(m, s);
    }
    m = workgroup_max(m, lid);
    var l = 0.0;
    for (var t = lid; t < len; t += RED_WIDTH) {
        let e = exp(scores[sbase + t] - m);
        scores[sbase + t] = e;
        l += e;
    }
    l = workgroup_sum(l, lid);
    storageBarrier();
    for (var j = lid; j < half; j += RED_WIDTH) {
        var acc = vec2<f32>(0.0);
        for (var t = 0u; t < len; t++) {
            acc += scores[sbase + t] * unpack2x16float(v_cache[cbase + t * half + j]);
        }
        out[h * HD + 2u * j] = acc.x / l;
        out[h * HD + 2u * j + 1u] = acc.y / l;
    }
}
