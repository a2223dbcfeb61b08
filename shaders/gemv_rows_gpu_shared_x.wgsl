// The GPU rows GEMV with x staged once per workgroup (after onnxruntime's
// matmul_nbits_qkv_sln): gemv_rows_gpu.wgsl's design, except that the workgroup's WG
// invocations first load the input (x, plus the partial vectors) ⊙ norm_w into workgroup
// memory together, one vec4 each in turn, and each slot's lanes then read their chunks'
// x from there. In the plain design every slot loads, adds up and squares every chunk
// of x again (SLOTS times the input's bytes through L1, and the parts' adds and the
// norm's Σx² SLOTS times over). Σx² is summed once: each invocation's share of it goes
// to `sq`, and lane l of each slot adds up entries l, l + TPR, … of it into its Σx²
// partial, so the slot reduction (which sums the lanes' partials anyway) yields the
// whole sum with no barrier of its own. The wrapper declares XS = K / 4 (the staged
// vec4s; it picks this design only where XS vec4s and the scratch fit workgroup memory)
// and everything gemv_rows_gpu.wgsl lists.

var<private> vals: array<f32, NV>;
var<workgroup> xs: array<vec4<f32>, XS>;
var<workgroup> sq: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    store_residual(wg == 0u, lid, WG);
    let lane = lid % TPR;
    let base = wg * SLOTS * RPS + (lid / TPR) * RPS;
    var s = 0.0;
    for (var i = lid; i < XS; i += WG) {
        let v = x_in(i);
        s += dot(v, v);
        xs[i] = normed(v, i);
    }
    sq[lid] = s;
    workgroupBarrier();
    for (var v = 0u; v < NV; v++) {
        vals[v] = 0.0;
    }
    if (NORM) {
        for (var i = lane; i < WG; i += TPR) {
            vals[NV - 1u] += sq[i];
        }
    }
    for (var c = lane; c < K / 32u; c += TPR) {
        let xb = 8u * c;
        var x: array<vec4<f32>, 8>;
        for (var i = 0u; i < 8u; i++) {
            x[i] = xs[xb + i];
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
