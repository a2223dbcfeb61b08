// Merge the per-split partial results of split-K decode attention (attention.wgsl): for
// q head h, with splits s of max score m_s, Σp l_s and unnormalised Σ p·v acc_s,
//   out[h] = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s,   M = max_s m_s.
// One workgroup per head; the split count follows from the position, as the host's grid.
// WO_FOLD: out[h] is also projected through its W_o columns into parts[h]
// (attention_wo.wgsl).

override N_HEADS: u32;
override HD: u32;
override SPLIT_LEN: u32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let splits = (step.pos + SPLIT_LEN) / SPLIT_LEN;
    let stride = HD + 2u;
    let first = h * splits * stride;
    var big_m = -3.4e38;
    for (var s = 0u; s < splits; s++) {
        big_m = max(big_m, partials[first + s * stride + HD]);
    }
    var l = 0.0;
    for (var s = 0u; s < splits; s++) {
        let at = first + s * stride;
        l += exp(partials[at + HD] - big_m) * partials[at + HD + 1u];
    }
    for (var d = lid; d < HD; d += 64u) {
        var acc = 0.0;
        for (var s = 0u; s < splits; s++) {
            let at = first + s * stride;
            acc += exp(partials[at + HD] - big_m) * partials[at + d];
        }
        out[h * HD + d] = acc / l;
        o_head[d] = acc / l;
    }
    workgroupBarrier();
    if (WO_FOLD) {
        project_head(h, lid);
    }
}
