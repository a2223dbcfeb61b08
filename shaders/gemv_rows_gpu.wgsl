// The GEMV's GPU design (after ggml-webgpu's mul_mat_vec and onnxruntime's
// MatMulNBits): a workgroup of SLOTS row slots × TPR lanes (WG invocations) computes
// SLOTS · RPS output rows. Slot s takes rows base + j (j < RPS); its lanes take the row's
// 32-value chunks (one vec4<u32> of code words each) in turn, so a slot's code loads are
// coalesced. Each lane loads a chunk's 32 x values once (with the norm weights) and reuses
// them for its RPS rows and both halves of gate/up. The lanes' partial sums — NV values:
// RPS × 2 dot products, then Σx² for the fused norm — meet in one `slot_reduce` per slot
// (gemv_q4_rows_gpu_tree.wgsl through workgroup memory, or gemv_q4_rows_gpu_subgroup.wgsl
// when a slot is one subgroup). Rows past N are computed from row N-1 and never stored.
// The matrix's format gives `accumulate` (a chunk's products into `vals`):
// gemv_q4_rows_gpu.wgsl for Q4 g64, gemv_q8_rows_gpu.wgsl for Q8 g32.
// The wrapper declares TPR (a power of two), SLOTS, RPS, WG = SLOTS · TPR and NV, and
// `argmax_epilogue` (after the stores: the head's fused argmax,
// gemv_q4_rows_gpu_argmax.wgsl, or nothing).

var<private> vals: array<f32, NV>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    store_residual(wg == 0u, lid, WG);
    let lane = lid % TPR;
    let base = wg * SLOTS * RPS + (lid / TPR) * RPS;
    for (var v = 0u; v < NV; v++) {
        vals[v] = 0.0;
    }
    for (var c = lane; c < K / 32u; c += TPR) {
        let xb = 8u * c;
        var x: array<vec4<f32>, 8>;
        for (var i = 0u; i < 8u; i++) {
            let v = x_in(xb + i);
            if (NORM) {
                vals[NV - 1u] += dot(v, v);
            }
            x[i] = normed(v, xb + i);
        }
        accumulate(c, x, base);
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
