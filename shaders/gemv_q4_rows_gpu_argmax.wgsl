// The GPU GEMV's fused argmax (the LM head, gemv_rows_gpu.wgsl with the wrapper's
// ARGMAX epilogue): after storing its rows, each workgroup writes the best of them to
// partials[wg] = (index, value bits) (a part of a split head: from its first row ROW0,
// a multiple of the workgroup's rows, on): the largest value, the lowest index on ties, NaN
// never; under the allowed-token mask (argmax.wgsl's layout: word 0 nonzero means only
// tokens whose bit i % 32 of word 1 + i / 32 is set compete) only allowed rows. A
// workgroup with no candidate writes (0xFFFFFFFF, bits of -3.4e38). argmax_partials.wgsl
// reduces the partials to the token.

@group(0) @binding(6) var<storage, read> mask: array<u32>;
@group(0) @binding(7) var<storage, read_write> partials: array<vec2<u32>>;

var<workgroup> slot_val: array<f32, SLOTS>;
var<workgroup> slot_idx: array<u32, SLOTS>;

// Does (v, i) beat (bv, bi)? Larger value wins; equal values go to the lower index.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return v > bv || (v == bv && i < bi);
}

fn allowed(i: u32) -> bool {
    return mask[0] == 0u || ((mask[1u + i / 32u] >> (i % 32u)) & 1u) != 0u;
}

// Lane 0 of each slot reads back the rows it stored; one invocation reduces the slots.
fn argmax_epilogue(wg: u32, lid: u32, lane: u32, base: u32) {
    if (lane == 0u) {
        var bv = -3.4e38;
        var bi = 0xFFFFFFFFu;
        for (var j = 0u; j < RPS; j++) {
            let o = base + j;
            if (o < N && allowed(ROW0 + o)) {
                let v = out[ROW0 + o];
                if (beats(v, ROW0 + o, bv, bi)) { // false for NaN
                    bv = v;
                    bi = ROW0 + o;
                }
            }
        }
        slot_val[lid / TPR] = bv;
        slot_idx[lid / TPR] = bi;
    }
    workgroupBarrier();
    if (lid == 0u && wg * SLOTS * RPS < N) {
        var bv = slot_val[0];
        var bi = slot_idx[0];
        for (var s = 1u; s < SLOTS; s++) {
            if (beats(slot_val[s], slot_idx[s], bv, bi)) {
                bv = slot_val[s];
                bi = slot_idx[s];
            }
        }
        partials[ROW0 / (SLOTS * RPS) + wg] = vec2<u32>(bi, bitcast<u32>(bv));
    }
}
