// The splits-in-lanes mapping of attention_lanes.wgsl (appended to it), for histories of
// several splits: lane `split` of a workgroup holds the whole GQA group (State: GROUP
// heads) and walks its split's keys, each key loaded once for the group's heads; 8
// splits per workgroup, KV heads along y. The invocation whose split holds this step's
// position first writes its key and value to the caches (write_kv), then reads them back
// like any other key: no other invocation reads that position. (Computing them in
// registers instead, as the heads mapping does, measured ~7% slower at 32K positions.)

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kv = wid.y;
    let hd4 = HD / 4u;
    let group = N_HEADS / N_KV;
    let len = step.pos + 1u;
    let splits = (len + SPLIT_LEN - 1u) / SPLIT_LEN;
    let split = wid.x * 8u + lid;
    if (split >= splits) {
        return;
    }
    // vec4 index of the group's first head in q and out.
    let row = kv * group * hd4;
    var st = state_init(row, 1.0 / sqrt(f32(HD)));
    // Key j's vec4 d (two u32 pairs) is at (kv · CTX + j) · hd4 + d.
    let cbase = kv * CTX * hd4;
    if (split == splits - 1u) {
        write_kv(kv, cbase + step.pos * hd4);
    }
    let end = min((split + 1u) * SPLIT_LEN, len);
    for (var j = split * SPLIT_LEN; j < end; j++) {
        st = state_step(st, cbase + j * hd4, true);
    }
    if (splits == 1u) {
        state_store(row, st);
    } else {
        state_store_partial(kv * group, split, splits, st);
    }
}
