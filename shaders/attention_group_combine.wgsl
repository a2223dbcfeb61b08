// The combine of the group attention (attention_group.wgsl) with the output projection
// W_o folded in: workgroup (kv, block) of the grid (N_KV, blocks) merges the per-split
// partial results of KV head kv's GQA group — for q head h, with splits s of max score
// m_s, Σp l_s and unnormalised Σ p·v acc_s,
//   o[h] = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s,   M = max_s m_s
// (as attention_combine.wgsl, which merges one q head per workgroup where W_o is not
// folded) — into o_sh, block 0 also into out[h], then writes W_o row block `block` of the
// group's part (attention_group_wo.wgsl). The split count follows from the position and
// the wrapper's split_len_at (at most MAX_SPLITS splits), as the host's grid of the
// splits. GROUP, HD4 and WIDTH: the group attention's layout consts; the W_o bindings
// (3-5), fold_o4 and split_len_at: the wrapper's.

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

@compute @workgroup_size(WIDTH)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kv = wid.x;
    let block = wid.y;
    let split_len = split_len_at(step.pos + 1u);
    let splits = (step.pos + split_len) / split_len;
    let stride = HD + 2u;
    for (var i = lid; i < GROUP * HD4; i += WIDTH) {
        let h = kv * GROUP + i / HD4;
        let d = 4u * (i % HD4);
        let first = h * splits * stride;
        var big_m = -3.4e38;
        for (var s = 0u; s < splits; s++) {
            big_m = max(big_m, partials[first + s * stride + HD]);
        }
        var l = 0.0;
        var acc = vec4<f32>(0.0);
        for (var s = 0u; s < splits; s++) {
            let at = first + s * stride;
            let e = exp(partials[at + HD] - big_m);
            l += e * partials[at + HD + 1u];
            acc += e * vec4<f32>(partials[at + d], partials[at + d + 1u], partials[at + d + 2u],
                                 partials[at + d + 3u]);
        }
        let o = acc / l;
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
