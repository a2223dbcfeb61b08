// Merge the per-split partial results of split-K decode attention (attention.wgsl,
// attention_lanes_splits.wgsl): for q head h, with splits s of max score m_s, Σp l_s and
// unnormalised Σ p·v acc_s,
//   out[h] = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s,   M = max_s m_s.
// Workgroup w merges PART_HEADS consecutive heads of one GQA group (the group's last
// chunk may hold fewer); the split count follows from the position, as the host's grid.
// WO_FOLD: the workgroup's heads are also projected through their W_o columns into
// parts[w] (attention_wo.wgsl).

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override SPLIT_LEN: u32;
override PART_HEADS: u32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let group = N_HEADS / N_KV;
    let chunks = (group + PART_HEADS - 1u) / PART_HEADS;
    let chunk = wid.x % chunks;
    let first = (wid.x / chunks) * group + chunk * PART_HEADS;
    let count = min(PART_HEADS, group - chunk * PART_HEADS);
    let splits = (step.pos + SPLIT_LEN) / SPLIT_LEN;
    let stride = HD + 2u;
    for (var g = 0u; g < count; g++) {
        let h = first + g;
        let at0 = h * splits * stride;
        var big_m = -3.4e38;
        for (var s = 0u; s < splits; s++) {
            big_m = max(big_m, partials[at0 + s * stride + HD]);
        }
        var l = 0.0;
        for (var s = 0u; s < splits; s++) {
            let at = at0 + s * stride;
            l += exp(partials[at + HD] - big_m) * partials[at + HD + 1u];
        }
        for (var d = lid; d < HD; d += 64u) {
            var acc = 0.0;
            for (var s = 0u; s < splits; s++) {
                let at = at0 + s * stride;
                acc += exp(partials[at + HD] - big_m) * partials[at + d];
            }
            out[h * HD + d] = acc / l;
            o_head[g * HD + d] = acc / l;
        }
    }
    workgroupBarrier();
    if (WO_FOLD) {
        project_heads(first, count, wid.x, lid);
    }
}
