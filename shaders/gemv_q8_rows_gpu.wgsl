// The GPU rows GEMV's chunk for Q8 g32 matrices (gemv_rows_gpu.wgsl): chunk `c` (one
// 32-value group: two vec4<u32> of code words per row, one f16 scale, w = scale · code:
// q8_unpack.wgsl) of the slot's RPS rows, both halves of gate/up, dotted with the lane's
// x values (`x`: the chunk's 32, normed) in f32.

fn accumulate(c: u32, x: array<vec4<f32>, 8>, base: u32) {
    let chunks = K / 32u;
    for (var j = 0u; j < RPS; j++) {
        let o = min(base + j, N - 1u);
        for (var p = 0u; p < parts(); p++) {
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
