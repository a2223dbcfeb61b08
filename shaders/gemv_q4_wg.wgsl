// Q4 g64 GEMV, the GPU design: one 64-wide workgroup per output row; invocations take
// 32-value chunks of the row in turn and the partial sums (and Σx² for the fused norm)
// meet in workgroup reductions. Output rows beyond 65,535 use a 2-D grid.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = wid.x + wid.y * nwg.x;
    store_residual(o == 0u, lid, 64u);
    if (o >= N) {
        return;
    }
    let n_parts = parts();
    let groups = K / 64u;
    let vec_per_row = K / 32u;
    var sums = vec2<f32>(0.0);
    var sum_sq = 0.0;
    for (var c = lid; c < vec_per_row; c += 64u) {
        let xb = 8u * c;
        if (NORM) {
            for (var i = xb; i < xb + 8u; i++) {
                let v = x_in(i);
                sum_sq += dot(v, v);
            }
        }
        let x0 = xn(xb); let x1 = xn(xb + 1u); let x2 = xn(xb + 2u); let x3 = xn(xb + 3u);
        let x4 = xn(xb + 4u); let x5 = xn(xb + 5u); let x6 = xn(xb + 6u); let x7 = xn(xb + 7u);
        let xsum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7, vec4<f32>(1.0));
        for (var p = 0u; p < n_parts; p++) {
            let r = matrix_row(o, p);
            let d = dot32(code4(r * vec_per_row + c), x0, x1, x2, x3, x4, x5, x6, x7);
            let q = unpack2x16float(qparams[r * groups + c / 2u]);
            sums[p] += q.x * d + q.y * xsum;
        }
    }
    let g = workgroup_sum(sums.x, lid);
    let u = workgroup_sum(sums.y, lid);
    var scale = 1.0;
    if (NORM) {
        scale = rms_scale(workgroup_sum(sum_sq, lid));
    }
    if (lid == 0u) {
        finish(o, scale * g, scale * u);
    }
}
