// The heads-in-lanes mapping of attention_lanes.wgsl (appended to it), for a history of
// one split (pos < SPLIT_LEN): lane g of a workgroup computes q head g of its KV head's
// group (groups over 8 heads take several workgroups along y), so the work runs up to 8
// lanes wide and each lane's State holds one head (the splits mapping runs one lane per
// KV head there, its State holding the whole group). Every lane loads every key itself,
// the same addresses across the workgroup: fine for one split, not for long histories.

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let chunk = head_chunk(wid.y);
    if (lid >= chunk.count) {
        return;
    }
    let kv = chunk.kv;
    let h = chunk.h0 + lid;
    let hd4 = HD / 4u;
    var st = state_init(h * hd4, 1.0 / sqrt(f32(HD)));
    // Key j's vec4 d (two u32 pairs) is at (kv · CTX + j) · hd4 + d; this step's key is
    // computed, not read, and the group's first lane writes it.
    let cbase = kv * CTX * hd4;
    for (var j = 0u; j < step.pos; j++) {
        st = state_step(st, cbase + j * hd4, true);
    }
    st = state_step_now(st, kv, lid == 0u && chunk.first == 0u, cbase + step.pos * hd4);
    state_store(h * hd4, st);
    // With W_o folded in: the workgroup's heads' share of the projection, part wid.y
    // (else nothing).
    state_project(h, wid.y, lid, st);
}
