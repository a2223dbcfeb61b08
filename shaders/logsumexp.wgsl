// ln Σ exp(logits) over N logits (NaN skipped), the normaliser of the sampler's
// log-probabilities: result[0] = it, result[1] = the largest logit. One 256-wide
// workgroup: each invocation keeps a running (max, Σ exp(x - max)) over its strided
// share (one exp per logit), then a tree merges the pairs.

override N: u32;

const LOWEST: f32 = -3.4e38;

@group(0) @binding(0) var<storage, read> logits: array<u32>;
@group(0) @binding(1) var<storage, read_write> result: array<f32>;

var<workgroup> wm: array<f32, 256>;
var<workgroup> ws: array<f32, 256>;

// The pair of (m1, s1) and (m2, s2) over the larger maximum.
fn merge(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2<f32> {
    let m = max(m1, m2);
    return vec2<f32>(m, s1 * exp(m1 - m) + s2 * exp(m2 - m));
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var m = LOWEST;
    var s = 0.0;
    for (var i = lid; i < N; i += 256u) {
        let bits = logits[i];
        if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
            continue;
        }
        let v = max(bitcast<f32>(bits), LOWEST);
        if (v > m) {
            s = s * exp(m - v) + 1.0;
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    wm[lid] = m;
    ws[lid] = s;
    workgroupBarrier();
    for (var half = 128u; half > 0u; half >>= 1u) {
        if (lid < half) {
            let p = merge(wm[lid], ws[lid], wm[lid + half], ws[lid + half]);
            wm[lid] = p.x;
            ws[lid] = p.y;
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        result[0] = wm[0] + log(ws[0]);
        result[1] = wm[0];
    }
}
