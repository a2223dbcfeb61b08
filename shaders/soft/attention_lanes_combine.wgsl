// The combine of the lanes design (attention_lanes.wgsl) with W_o folded in, after a
// history of several splits: the workgroups and lanes of the heads mapping
// (attention_lanes_heads.wgsl), lane g merging q head g's partial results
// (state_merge, the layout of attention_combine.wgsl) into its output, which it stores
// and projects through its W_o columns as the heads mapping does (state_project: one
// part per workgroup, summed over the subgroup). (attention_combine.wgsl's workgroup
// design would read every output value once per W_o code word from workgroup memory,
// lane by lane on CPU adapters.)

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let chunk = head_chunk(wid.y);
    if (lid >= chunk.count) {
        return;
    }
    let h = chunk.h0 + lid;
    let splits = (step.pos + SPLIT_LEN) / SPLIT_LEN;
    let st = state_merge(h, splits);
    state_store(h * (HD / 4u), st);
    state_project(h, wid.y, lid, st);
}
