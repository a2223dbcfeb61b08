// Q4 g64 GEMV, the CPU-adapter design (lavapipe, SwiftShader): each invocation computes
// ROWS output rows, strided by the workgroup size, with no workgroup memory and no
// barriers. Per 64-value group the x values are loaded once and reused for every row.

override WG: u32 = 64u;
const ROWS: u32 = 4u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let group_index = wid.x + wid.y * nwg.x;
    let base = group_index * WG * ROWS;
    if (base >= N) {
        return;
    }
    let parts = rows_per_output();
    let groups = K / 64u;
    let vec_per_row = K / 32u;
    // acc[2i] = gate/plain sum of output row i, acc[2i + 1] = up sum (SwiGLU only).
    var acc: array<f32, 8>;
    var code_base: array<u32, 8>;
    var param_base: array<u32, 8>;
    for (var i = 0u; i < ROWS; i++) {
        let o = min(base + i * WG + lid, N - 1u);
        for (var p = 0u; p < 2u; p++) {
            // Without SwiGLU, part 1 re-reads part 0's row; its sum is never used.
            let r = matrix_row(o, min(p, parts - 1u));
            code_base[2u * i + p] = r * vec_per_row;
            param_base[2u * i + p] = r * groups;
            acc[2u * i + p] = 0.0;
        }
    }
    for (var g = 0u; g < groups; g++) {
        let xb = 16u * g;
        let x0 = x[xb]; let x1 = x[xb + 1u]; let x2 = x[xb + 2u]; let x3 = x[xb + 3u];
        let x4 = x[xb + 4u]; let x5 = x[xb + 5u]; let x6 = x[xb + 6u]; let x7 = x[xb + 7u];
        let x8 = x[xb + 8u]; let x9 = x[xb + 9u]; let xa = x[xb + 10u]; let xbb = x[xb + 11u];
        let xc = x[xb + 12u]; let xd = x[xb + 13u]; let xe = x[xb + 14u]; let xf = x[xb + 15u];
        let one = vec4<f32>(1.0);
        let xsum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7
                     + x8 + x9 + xa + xbb + xc + xd + xe + xf, one);
        for (var s = 0u; s < 2u * ROWS; s++) {
            if (s % 2u == 1u && parts == 1u) {
                continue;
            }
            let c = code_base[s] + 2u * g;
            let d = dot32(codes[c], x0, x1, x2, x3, x4, x5, x6, x7)
                  + dot32(codes[c + 1u], x8, x9, xa, xbb, xc, xd, xe, xf);
            let p = unpack2x16float(qparams[param_base[s] + g]);
            acc[s] += p.x * d + p.y * xsum;
        }
    }
    for (var i = 0u; i < ROWS; i++) {
        let o = base + i * WG + lid;
        if (o < N) {
            finish(o, acc[2u * i], acc[2u * i + 1u]);
        }
    }
}
