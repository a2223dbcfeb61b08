// Q4 g64 GEMV, the GPU design (after ggml-webgpu's mul_mat_vec and onnxruntime's
// MatMulNBits): a workgroup of SLOTS row slots × TPR lanes (WG invocations) computes
// SLOTS · RPS output rows. Slot s takes rows base + j (j < RPS); its lanes take the row's
// 32-value chunks (one vec4<u32> of code words each) in turn, so a slot's code loads are
// coalesced. Each lane loads a chunk's 32 x values once (with the norm weights) and reuses
// them for its RPS rows and both halves of gate/up, as f32 or (with shader-f16) as f16
// (`stage_x` / `chunk_dot`: gemv_q4_rows_gpu_f32.wgsl / _f16.wgsl). The lanes' partial sums — NV values:
// RPS × 2 dot products, then Σx² for the fused norm — meet in one `slot_reduce` per slot
// (gemv_q4_rows_gpu_tree.wgsl through workgroup memory, or gemv_q4_rows_gpu_subgroup.wgsl
// when a slot is one subgroup). Rows past N are computed from row N-1 and never stored.
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
    let n_parts = parts();
    let groups = K / 64u;
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
        let xsum = dot(x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7], vec4<f32>(1.0));
        let xc = stage_x(x);
        for (var j = 0u; j < RPS; j++) {
            let o = min(base + j, N - 1u);
            for (var p = 0u; p < n_parts; p++) {
                let r = matrix_row(o, p);
                let d = chunk_dot(code4(r * chunks + c), xc);
                let q = unpack2x16float(qparams[r * groups + c / 2u]);
                // w = scale · code + min = scale · (code − CODE_BIAS) + (min + CODE_BIAS · scale).
                vals[2u * j + p] += q.x * d + (q.y + CODE_BIAS * q.x) * xsum;
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
