// The GPU GEMV's slot reduction without subgroups (Safari, most browsers): each lane's NV
// values into workgroup memory, then a tree over the slot's TPR lanes, log2(TPR) barriers
// for all NV values together; lane 0 of each slot ends with the sums in `vals`.

var<workgroup> red: array<f32, NV * WG>;

fn slot_reduce(lid: u32, lane: u32) {
    for (var v = 0u; v < NV; v++) {
        red[v * WG + lid] = vals[v];
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var v = 0u; v < NV; v++) {
                red[v * WG + lid] += red[v * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    for (var v = 0u; v < NV; v++) {
        vals[v] = red[v * WG + lid];
    }
}
