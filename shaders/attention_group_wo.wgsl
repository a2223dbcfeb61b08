// The output projection W_o folded into the group design (attention_group.wgsl and
// attention_group_combine.wgsl, after attention_wo.wgsl's wo_dot8): once a workgroup
// holds its KV head kv's GQA group's normalised outputs o (GROUP · HD values, head g's
// vec4 d as fold_o4(g · HD4 + d)), it writes W_o row block `block` of the group's part,
//   parts[kv][r] = Σ_{c < GROUP·HD} W_o[r][kv·GROUP·HD + c] · o[c]
// for r in [block · WO_ROWS, min((block + 1) · WO_ROWS, HIDDEN)), so that Σ_kv parts[kv]
// = W_o · o: the gate/up GEMV adds N_KV parts (not N_HEADS) to the residual. WO_LANES
// lanes per row take its code words in turn (neighbouring lanes, neighbouring words:
// coalesced loads) and meet in `red` (WIDTH floats); WIDTH / WO_LANES rows per pass.
// WO_ROWS and WO_LANES (a power of two dividing WIDTH) are the wrapper's consts
// (attention_group.rs, `WoBlocks`: a device-profile choice). Call in uniform control flow
// after a barrier that follows the writes of o; ends with a barrier.

fn project_block(kv: u32, block: u32, lid: u32) {
    let words = GROUP * HD / 8u;
    let w0 = kv * words;
    let lane = lid % WO_LANES;
    let end = min((block + 1u) * WO_ROWS, HIDDEN);
    for (var r0 = block * WO_ROWS; r0 < end; r0 += WIDTH / WO_LANES) {
        let r = r0 + lid / WO_LANES;
        var acc = 0.0;
        if (r < end) {
            for (var j = lane; j < words; j += WO_LANES) {
                acc += wo_dot8(r, w0 + j, fold_o4(2u * j), fold_o4(2u * j + 1u));
            }
        }
        red[lid] = acc;
        workgroupBarrier();
        if (lane == 0u && r < end) {
            var sum = 0.0;
            for (var l = 0u; l < WO_LANES; l++) {
                sum += red[lid + l];
            }
            parts[kv * HIDDEN + r] = sum;
        }
        workgroupBarrier();
    }
}
