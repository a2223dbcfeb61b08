// Q4 g64 GEMV, the CPU-adapter design (lavapipe, SwiftShader): each invocation computes
// ROWS output rows, strided by the workgroup size (rows base + i·WG), with no workgroup
// memory and no barriers. x is read from a uniform buffer where it fits (on mesa 22.3's
// lavapipe that is one scalar load only at a constant index; x's index follows the loop,
// so each component is an 8-lane gather, see gemv_q4_xgroup_lanes.wgsl); per 64-value group
// the 64 x values are loaded once, pre-scaled for dot32_scaled (codes masked in place,
// no per-byte shifts: on CPU adapters instructions per weight, not bytes, set the speed)
// and reused for the ROWS · PARTS matrix rows.
// ROWS, PARTS and the x bindings are declared by the wrapper (gemv_q4.rs), which also
// writes the group's x loads (gemv_q4_xgroup.wgsl) in place of the `//#x_group` line.

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let first = (wid.x + wid.y * nwg.x) * WG * ROWS;
    store_residual(first == 0u, lid, WG);
    if (first >= N) {
        return;
    }
    let groups = K / 64u;
    let vec_per_row = K / 32u;
    // acc[i · PARTS + p]: part p (0 gate/plain, 1 up) of output row first + i·WG + lid.
    var acc: array<f32, ROWS * PARTS>;
    for (var s = 0u; s < ROWS * PARTS; s++) {
        acc[s] = 0.0;
    }
    var sum_sq = 0.0; // Σx² (NORM), summed by the x_group loads
    for (var g = 0u; g < groups; g++) {
        let xb = 16u * g;
//#x_group
        for (var s = 0u; s < ROWS * PARTS; s++) {
            // Rows past N repeat row N - 1; their sums are never written.
            let o = min(first + (s / PARTS) * WG + lid, N - 1u);
            let r = matrix_row(o, s % PARTS);
            let c = r * vec_per_row + 2u * g;
            let d = dot32_scaled(code4(c), s0, s1, s2, s3, s4, s5, s6, s7)
                  + dot32_scaled(code4(c + 1u), s8, s9, sa, sb, sc, sd, se, sf);
            let p = unpack2x16float(qparams[r * groups + g]);
            acc[s] += p.x * d + p.y * xsum;
        }
    }
    let scale = rms_scale(sum_sq);
    for (var i = 0u; i < ROWS; i++) {
        let o = first + i * WG + lid;
        if (o < N) {
            finish(o, scale * acc[i * PARTS], scale * acc[i * PARTS + PARTS - 1u]);
        }
    }
}
