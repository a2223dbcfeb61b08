// The combine of the group attention (attention_group.wgsl) with the output projection
// W_o folded in: workgroup (kv, block) of the grid (N_KV, blocks) merges the per-split
// partial results of KV head kv's GQA group — for q head h, with splits s of max score
// m_s, Σp l_s and unnormalised Σ p·v acc_s,
//   o[h] = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s,   M = max_s m_s
// (attention_group_merge.wgsl merges one q head per workgroup where W_o is not folded) —
// into o_sh, block 0 also into out[h], then writes W_o row block `block` of the group's
// part (attention_group_wo.wgsl). The merge: (1) the lanes over the (head, split) pairs
// load every split's m_s and l_s into workgroup memory; (2) lane g turns head g's into
// weights e^(m_s - M) and the denominator; (3) the lanes over (head, vec4 of head_dim) sum
// the weighted acc_s, four splits' loads in flight at a time. The split count follows
// from the position and the wrapper's split_len_at (at most MAX_SPLITS splits), as the
// host's grid of the splits. GROUP, HD4 and WIDTH: the group attention's layout consts;
// MAX_SPLITS, the W_o bindings (3-5), fold_o4 and split_len_at: the wrapper's.

override N_HEADS: u32;
override HD: u32;
override SPLIT_LEN: u32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

// The group's merged outputs: head g's vec4 d at g · HD4 + d.
var<workgroup> o_sh: array<vec4<f32>, GROUP * HD4>;
// The projection's row sums (attention_group_wo.wgsl).
var<workgroup> red: array<f32, WIDTH>;
// Head g's split s at g · MAX_SPLITS + s: its max score, then its weight e^(m_s - M).
var<workgroup> w_sh: array<f32, GROUP * MAX_SPLITS>;
// Head g's split s: its Σp.
var<workgroup> l_sh: array<f32, GROUP * MAX_SPLITS>;
// Head g: the denominator Σ_s e^(m_s - M) l_s.
var<workgroup> denom_sh: array<f32, GROUP>;

// Vec4 of the partials from `at` (an f32 index: the rows of HD + 2 are not vec4-aligned).
fn part4(at: u32) -> vec4<f32> {
    return vec4<f32>(partials[at], partials[at + 1u], partials[at + 2u], partials[at + 3u]);
}

@compute @workgroup_size(WIDTH)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kv = wid.x;
    let block = wid.y;
    let split_len = split_len_at(step.pos + 1u);
    let splits = (step.pos + split_len) / split_len;
    let stride = HD + 2u;
    // (1) Every (head, split)'s max score and Σp, the lanes over the pairs: one load
    // round trip, not one per split.
    for (var j = lid; j < GROUP * splits; j += WIDTH) {
        let g = j / splits;
        let s = j % splits;
        let at = ((kv * GROUP + g) * splits + s) * stride + HD;
        w_sh[g * MAX_SPLITS + s] = partials[at];
        l_sh[g * MAX_SPLITS + s] = partials[at + 1u];
    }
    workgroupBarrier();
    // (2) Lane g: head g's max M, the splits' weights and the denominator.
    if (lid < GROUP) {
        let w0 = lid * MAX_SPLITS;
        var big_m = -3.4e38;
        for (var s = 0u; s < splits; s++) {
            big_m = max(big_m, w_sh[w0 + s]);
        }
        var l = 0.0;
        for (var s = 0u; s < splits; s++) {
            let e = exp(w_sh[w0 + s] - big_m);
            w_sh[w0 + s] = e;
            l += e * l_sh[w0 + s];
        }
        denom_sh[lid] = l;
    }
    workgroupBarrier();
    // (3) The weighted sums, four splits' loads in flight at a time.
    for (var i = lid; i < GROUP * HD4; i += WIDTH) {
        let g = i / HD4;
        let h = kv * GROUP + g;
        let d = 4u * (i % HD4);
        let first = h * splits * stride + d;
        let w0 = g * MAX_SPLITS;
        var acc = vec4<f32>(0.0);
        var s = 0u;
        for (; s + 3u < splits; s += 4u) {
            let a0 = part4(first + s * stride);
            let a1 = part4(first + (s + 1u) * stride);
            let a2 = part4(first + (s + 2u) * stride);
            let a3 = part4(first + (s + 3u) * stride);
            acc += w_sh[w0 + s] * a0 + w_sh[w0 + s + 1u] * a1 + w_sh[w0 + s + 2u] * a2
                 + w_sh[w0 + s + 3u] * a3;
        }
        for (; s < splits; s++) {
            acc += w_sh[w0 + s] * part4(first + s * stride);
        }
        let o = acc / denom_sh[g];
        o_sh[i] = o;
        if (block == 0u) {
            let at = h * HD + d;
            out[at] = o.x;
            out[at + 1u] = o.y;
            out[at + 2u] = o.z;
            out[at + 3u] = o.w;
        }
    }
    workgroupBarrier();
    project_block(kv, block, lid);
}
