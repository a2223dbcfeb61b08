// Causal flash attention for prefill (GQA) over the f16 KV cache: the chunk's queries
// (positions chunk.start + t) attend to cache positions 0..=their own, which hold the
// earlier chunks and this chunk (written by rope_kv_prefill first).
//
// One 64-invocation workgroup per (64 queries, q head h); invocation lid owns query
// t0 + lid. Key/value tiles of BKV positions of KV head h / (N_HEADS / N_KV) are unpacked
// into workgroup memory (BKV · HD ≤ 2048 floats each, BKV set by the host); every
// invocation reads the same tile element at a time (broadcast loads). Online softmax per
// key: running max, rescale of the accumulator, weighted value.
//
// q: [count][N_HEADS·HD] f32; out: [count][N_HEADS·HD] f32.

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override CTX: u32;
override BKV: u32;

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_cache: array<u32>;
@group(0) @binding(3) var<storage, read> v_cache: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

var<workgroup> ks: array<vec4<f32>, 512>; // [BKV][HD/4]
var<workgroup> vs: array<vec4<f32>, 512>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.y;
    let kv = h / (N_HEADS / N_KV);
    let hd4 = HD / 4u;
    let half = HD / 2u;
    let t0 = wid.x * 64u;
    let count = chunk.count;
    if (t0 >= count) {
        return;
    }
    let t = t0 + lid;
    let valid = t < count;
    let pos = chunk.start + min(t, count - 1u);
    // Keys this workgroup needs: 0..=its last query's position.
    let last = chunk.start + min(t0 + 63u, count - 1u);
    let scale = 1.0 / sqrt(f32(HD));
    let row = (min(t, count - 1u) * N_HEADS + h) * hd4;
    var qv: array<vec4<f32>, 64>;
    var acc: array<vec4<f32>, 64>;
    for (var d = 0u; d < hd4; d++) {
        qv[d] = q[row + d] * scale;
        acc[d] = vec4<f32>(0.0);
    }
    var m = -3.4e38;
    var l = 0.0;
    let cbase = kv * CTX * half;
    for (var k0 = 0u; k0 <= last; k0 += BKV) {
        // Unpack the tile: BKV positions × HD values of K and of V (past `last`: zeros).
        // Invocation i writes vec4 i: two packed f16 pairs.
        for (var i = lid; i < BKV * hd4; i += 64u) {
            let p = k0 + i / hd4;
            let c = cbase + p * half + 2u * (i % hd4);
            var kw = vec2<u32>(0u);
            var vw = vec2<u32>(0u);
            if (p <= last) {
                kw = vec2<u32>(k_cache[c], k_cache[c + 1u]);
                vw = vec2<u32>(v_cache[c], v_cache[c + 1u]);
            }
            ks[i] = vec4<f32>(unpack2x16float(kw.x), unpack2x16float(kw.y));
            vs[i] = vec4<f32>(unpack2x16float(vw.x), unpack2x16float(vw.y));
        }
        workgroupBarrier();
        // Keys of this tile the query sees, in one pass: the online softmax per key
        // (running max, rescale, weighted value) rather than a score pass then a value
        // pass. Few loop iterations per key matter on lavapipe: mesa's loop limiter ends
        // all of a shader's loops, silently, after 65,535 iterations in all (the two-pass
        // loop passed it at ~28K keys; this one at ~51K). The d loops have constant trip
        // counts and are unrolled.
        let n = select(0u, min(BKV, pos + 1u - k0), pos >= k0);
        for (var j = 0u; j < n; j++) {
            var d4 = vec4<f32>(0.0);
            for (var d = 0u; d < hd4; d++) {
                d4 += qv[d] * ks[j * hd4 + d];
            }
            let sj = d4.x + d4.y + d4.z + d4.w;
            let m_new = max(m, sj);
            let corr = exp(m - m_new);
            let p = exp(sj - m_new);
            l = l * corr + p;
            for (var d = 0u; d < hd4; d++) {
                acc[d] = acc[d] * corr + p * vs[j * hd4 + d];
            }
            m = m_new;
        }
        workgroupBarrier();
    }
    if (valid) {
        for (var d = 0u; d < hd4; d++) {
            out[row + d] = acc[d] / l;
        }
    }
}
