// The GPU GEMV's slot reduction in one barrier (any adapter): each lane writes its NV
// partials to workgroup memory, one barrier, then lane 0 of each slot adds up its
// slot's TPR × NV partials itself, where the tree (gemv_q4_rows_gpu_tree.wgsl) takes
// log2(TPR) barriers; at small K (Pocket's 896: under 2 chunks per lane) the barriers,
// not the adds, are what a slot waits for. A lane's partials are NV consecutive floats
// (NV = 2 · RPS + 1 is odd, so 32 neighbouring lanes writing value v hit 32 different
// banks) and each slot's block has one float of padding (lane 0 of every slot reads the
// same (lane, value) at once: an odd stride between slots keeps them on different banks).
// Lane 0 of each slot ends with the sums in `vals`.

const SLOT_STRIDE: u32 = TPR * NV + 1u;

var<workgroup> red: array<f32, SLOTS * SLOT_STRIDE>;

fn slot_reduce(lid: u32, lane: u32) {
    let slot = (lid / TPR) * SLOT_STRIDE;
    for (var v = 0u; v < NV; v++) {
        red[slot + lane * NV + v] = vals[v];
    }
    workgroupBarrier();
    if (lane == 0u) {
        for (var l = 1u; l < TPR; l++) {
            for (var v = 0u; v < NV; v++) {
                vals[v] += red[slot + l * NV + v];
            }
        }
    }
}
