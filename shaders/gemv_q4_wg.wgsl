// Q4 g64 GEMV, the GPU design: one 64-wide workgroup per output row; invocations take
// 32-value chunks of the row in turn and the partial sums meet in a workgroup reduction.
// Output rows beyond 65,535 use a 2-D grid.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = wid.x + wid.y * nwg.x;
    if (o >= N) {
        return;
    }
    let parts = rows_per_output();
    let groups = K / 64u;
    let vec_per_row = K / 32u;
    var sums = vec2<f32>(0.0);
    for (var c = lid; c < vec_per_row; c += 64u) {
        let xb = 8u * c;
        let x0 = x[xb]; let x1 = x[xb + 1u]; let x2 = x[xb + 2u]; let x3 = x[xb + 3u];
        let x4 = x[xb + 4u]; let x5 = x[xb + 5u]; let x6 = x[xb + 6u]; let x7 = x[xb + 7u];
        let xsum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7, vec4<f32>(1.0));
        for (var p = 0u; p < parts; p++) {
            let r = matrix_row(o, p);
            let d = dot32(codes[r * vec_per_row + c], x0, x1, x2, x3, x4, x5, x6, x7);
            let q = unpack2x16float(qparams[r * groups + c / 2u]);
            sums[p] += q.x * d + q.y * xsum;
        }
    }
    let g = workgroup_sum(sums.x, lid);
    let u = workgroup_sum(sums.y, lid);
    if (lid == 0u) {
        finish(o, g, u);
    }
}
