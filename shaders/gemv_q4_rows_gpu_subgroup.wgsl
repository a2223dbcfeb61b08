// The GPU GEMV's slot reduction where a slot's TPR lanes are exactly one subgroup: a
// subgroupAdd per value, no workgroup memory or barrier.

fn slot_reduce(lid: u32, lane: u32) {
    for (var v = 0u; v < NV; v++) {
        vals[v] = subgroupAdd(vals[v]);
    }
}
