// Q8 g32 GEMV, the GPU rows design of gemv_q4_rows_gpu.wgsl for 8-bit codes: a workgroup
// of SLOTS row slots × TPR lanes computes SLOTS · RPS output rows; a slot's lanes take
// the row's 32-value groups in turn (two vec4<u32> of code words each, coalesced), each
// lane loading a group's 32 x values once (with the norm weights) for its RPS rows and
// both halves of gate/up. w = scale · code, one f16 scale per group (`qparams` holds the
// scales, q8_unpack.wgsl). The lanes' partial sums — NV values: RPS × 2 dot products,
// then Σx² for the fused norm — meet in `slot_reduce` (the Q4 design's tree or subgroup
// reduction); the stores, the fused norm's factor, the epilogue and the optional
// argmax epilogue are the Q4 design's. Rows past N are computed from row N-1 and never
// stored.

var<private> vals: array<f32, NV>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    store_residual(wg == 0u, lid, WG);
    let lane = lid % TPR;
    let base = wg * SLOTS * RPS + (lid / TPR) * RPS;
    let n_parts = parts();
    let chunks = K / 32u;
    for (var v = 0u; v < NV; v++) {
        vals[v] = 0.0;
    }
    for (var c = lane; c < chunks; c += TPR) {
        let xb = 8u * c;
        var x: array<vec4<f32>, 8>;
        for (var i = 0u; i < 8u; i++) {
            let v = x_in(xb + i);
            if (NORM) {
                vals[NV - 1u] += dot(v, v);
            }
            x[i] = normed(v, xb + i);
        }
        for (var j = 0u; j < RPS; j++) {
            let o = min(base + j, N - 1u);
            for (var p = 0u; p < n_parts; p++) {
                let r = matrix_row(o, p);
                let at = 2u * (r * chunks + c);
                let c0 = code4(at);
                let c1 = code4(at + 1u);
                let d = dot(i8x4(c0.x), x[0]) + dot(i8x4(c0.y), x[1])
                      + dot(i8x4(c0.z), x[2]) + dot(i8x4(c0.w), x[3])
                      + dot(i8x4(c1.x), x[4]) + dot(i8x4(c1.y), x[5])
                      + dot(i8x4(c1.z), x[6]) + dot(i8x4(c1.w), x[7]);
                vals[2u * j + p] += q8_scale(r * (K / 64u), c) * d;
            }
        }
    }
    slot_reduce(lid, lane);
    if (lane == 0u) {
        let scale = rms_scale(vals[NV - 1u]);
        for (var j = 0u; j < RPS; j++) {
            if (base + j < N) {
                finish(base + j, scale * vals[2u * j], scale * vals[2u * j + 1u]);
            }
        }
    }
    argmax_epilogue(wg, lid, lane, base);
}
