// Q4 g64 GEMV, the CPU-adapter design (lavapipe, SwiftShader): each invocation computes
// ROWS output rows, strided by the workgroup size (rows base + i·WG), with no workgroup
// memory and no barriers. x is read from a uniform buffer where it fits (loads that are
// the same for every invocation: one scalar load, not one per lane); per 64-value group
// the 64 x values are loaded once, pre-scaled for dot32_scaled (codes masked in place,
// no per-byte shifts: on CPU adapters instructions per weight, not bytes, set the speed)
// and reused for the ROWS · PARTS matrix rows.
// ROWS, PARTS and the x bindings are declared by the wrapper (gemv_q4.rs).

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
    for (var g = 0u; g < groups; g++) {
        let xb = 16u * g;
        let x0 = xn(xb); let x1 = xn(xb + 1u); let x2 = xn(xb + 2u); let x3 = xn(xb + 3u);
        let x4 = xn(xb + 4u); let x5 = xn(xb + 5u); let x6 = xn(xb + 6u); let x7 = xn(xb + 7u);
        let x8 = xn(xb + 8u); let x9 = xn(xb + 9u); let xa = xn(xb + 10u); let xbb = xn(xb + 11u);
        let xc = xn(xb + 12u); let xd = xn(xb + 13u); let xe = xn(xb + 14u); let xf = xn(xb + 15u);
        let xsum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7
                     + x8 + x9 + xa + xbb + xc + xd + xe + xf, vec4<f32>(1.0));
        let s0 = x0 * X_SCALE; let s1 = x1 * X_SCALE; let s2 = x2 * X_SCALE; let s3 = x3 * X_SCALE;
        let s4 = x4 * X_SCALE; let s5 = x5 * X_SCALE; let s6 = x6 * X_SCALE; let s7 = x7 * X_SCALE;
        let s8 = x8 * X_SCALE; let s9 = x9 * X_SCALE; let sa = xa * X_SCALE; let sb = xbb * X_SCALE;
        let sc = xc * X_SCALE; let sd = xd * X_SCALE; let se = xe * X_SCALE; let sf = xf * X_SCALE;
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
    var sum_sq = 0.0;
    if (NORM) {
        for (var i = 0u; i < K / 4u; i++) {
            let v = x_in(i);
            sum_sq += dot(v, v);
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
