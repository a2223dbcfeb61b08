// The combine of the group attention's splits (attention_group.wgsl) where W_o is not
// folded in: workgroup h of the grid (N_HEADS) merges q head h's per-split partial
// results — for splits s of max score m_s, Σp l_s and unnormalised Σ p·v acc_s,
//   out[h] = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s,   M = max_s m_s
// (attention_combine.wgsl's formula, which every lane there runs over all the splits) with
// the lanes over the splits (as ggml-webgpu's flash_attn_vec_reduce):
// (1) lane i folds the (m_s, l_s) of splits i, i + MERGE_WIDTH, … into one running pair
//     (online softmax) and one tree over the lanes gives (M, L);
// (2) lane (r, d) sums vec4 d of acc_s weighted by e^(m_s - M) over splits r, r + RANGES, …;
// (3) the ranges' sums are added by halving rounds in workgroup memory and the first
//     range writes out[h] = Σ / L.
// The split count follows from the position and the design's split_len_at (at most
// MAX_SPLITS_UNFOLDED), as the host's grid. HD4 (HD / 4, the group layout's) and
// MERGE_WIDTH (invocations, a power of two) are consts from the wrapper
// (attention_group.rs); split_len_at too.

override N_HEADS: u32;
override HD: u32;
override SPLIT_LEN: u32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

// Split ranges of (2): RANGES · HD4 ≤ MERGE_WIDTH lanes own an accumulator vec4 each.
const RANGES: u32 = MERGE_WIDTH / HD4;
const NEG_BIG: f32 = -3.4e38;

// (1): each lane's running (max, sum); (2)-(3): the ranges' accumulators.
var<workgroup> stats: array<vec2<f32>, MERGE_WIDTH>;
var<workgroup> acc_sh: array<vec4<f32>, MERGE_WIDTH>;

// Two running softmax pairs (max score, Σ e^(score - max)) as one.
fn merge_pair(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let m = max(a.x, b.x);
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

@compute @workgroup_size(MERGE_WIDTH)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let splits = step.pos / split_len_at(step.pos + 1u) + 1u;
    let stride = HD + 2u;
    let first = h * splits * stride;

    // (1) (M, L) over the splits.
    var pair = vec2<f32>(NEG_BIG, 0.0);
    for (var s = lid; s < splits; s += MERGE_WIDTH) {
        let at = first + s * stride + HD;
        pair = merge_pair(pair, vec2<f32>(partials[at], partials[at + 1u]));
    }
    stats[lid] = pair;
    workgroupBarrier();
    for (var half = MERGE_WIDTH / 2u; half > 0u; half >>= 1u) {
        if (lid < half) {
            stats[lid] = merge_pair(stats[lid], stats[lid + half]);
        }
        workgroupBarrier();
    }
    let total = stats[0];

    // (2) Lane (r, d): vec4 d of the weighted sums of its splits.
    let r = lid / HD4;
    let d = lid % HD4;
    var acc = vec4<f32>(0.0);
    if (r < RANGES) {
        for (var s = r; s < splits; s += RANGES) {
            let at = first + s * stride;
            let e = exp(partials[at + HD] - total.x);
            let v = at + 4u * d;
            acc += e * vec4<f32>(partials[v], partials[v + 1u], partials[v + 2u], partials[v + 3u]);
        }
    }
    acc_sh[lid] = acc;
    workgroupBarrier();

    // (3) Ranges [half, count) pass theirs on to [0, count - half) each round.
    for (var count = RANGES; count > 1u; count = (count + 1u) / 2u) {
        let half = (count + 1u) / 2u;
        if (r < count - half) {
            acc_sh[lid] += acc_sh[lid + half * HD4];
        }
        workgroupBarrier();
    }
    if (lid < HD4) {
        let o = acc_sh[lid] / total.y;
        let at = h * HD + 4u * lid;
        out[at] = o.x;
        out[at + 1u] = o.y;
        out[at + 2u] = o.z;
        out[at + 3u] = o.w;
    }
}
