// The GPU rows GEMV's chunk for Q4 g64 matrices (gemv_rows_gpu.wgsl): chunk `c` (32
// values, one vec4<u32> of code words per row) of the slot's RPS rows, both halves of
// gate/up, dotted with the lane's x values (`x`: the chunk's 32, normed) as f32 or
// (with shader-f16) f16 (`stage_x` / `chunk_dot`: gemv_q4_rows_gpu_f32.wgsl / _f16.wgsl).

fn accumulate(c: u32, x: array<vec4<f32>, 8>, base: u32) {
    let groups = K / 64u;
    let chunks = K / 32u;
    let xsum = dot(x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7], vec4<f32>(1.0));
    let xc = stage_x(x);
    for (var j = 0u; j < RPS; j++) {
        let o = min(base + j, N - 1u);
        for (var p = 0u; p < parts(); p++) {
            let r = matrix_row(o, p);
            let d = chunk_dot(code4(r * chunks + c), xc);
            let q = unpack2x16float(qparams[r * groups + c / 2u]);
            // w = scale · code + min = scale · (code − CODE_BIAS) + (min + CODE_BIAS · scale).
            vals[2u * j + p] += q.x * d + (q.y + CODE_BIAS * q.x) * xsum;
        }
    }
}
