// Shared by the CPU-adapter attention kernels (attention_prefill_lanes.wgsl,
// attention_lanes.wgsl), prepended after kv_vec4.wgsl (f16x4) and before the wrapper's
// generated `State`
// (lanes_state.rs): one invocation holds a whole GQA group's queries and accumulators and
// walks keys one at a time with an online softmax. The wrapper's source declares
// `k_cache` and `v_cache` as arrays of vec2<u32> (4 f16 values each).

// The online-softmax update of one head for score s: (m, l) → (m', l'), and the factors
// (corr, p) that rescale its accumulator and weigh the value. A key not `seen` leaves
// everything as it is (corr 1, p 0).
fn softmax_step(m: f32, l: f32, s: f32, seen: bool) -> vec4<f32> {
    let m_new = select(m, max(m, s), seen);
    let corr = exp(m - m_new);
    let p = select(0.0, exp(s - m_new), seen);
    return vec4<f32>(m_new, l * corr + p, corr, p);
}
