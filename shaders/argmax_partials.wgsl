// The fused head argmax's second pass (gemv_q4_rows_gpu_argmax.wgsl writes the
// partials): the best of G (index, value bits) partials, the lower index on equal
// values, into result[0] = index, result[1] = value bits: argmax.wgsl's result over the
// same logits and mask (both take the maximum of one total order, in any grouping).
// With no candidate at all (every token masked out, or all NaN) the result is index 0
// with value bits of -3.4e38, as argmax.wgsl's. One 256-wide workgroup.

override G: u32;

@group(0) @binding(0) var<storage, read> partials: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> result: array<u32>;

var<workgroup> best_val: array<f32, 256>;
var<workgroup> best_idx: array<u32, 256>;

fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var bv = -3.4e38;
    var bi = 0xFFFFFFFFu;
    for (var g = lid; g < G; g += 256u) {
        let p = partials[g];
        let v = bitcast<f32>(p.y);
        if (beats(v, p.x, bv, bi)) {
            bv = v;
            bi = p.x;
        }
    }
    best_val[lid] = bv;
    best_idx[lid] = bi;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s && beats(best_val[lid + s], best_idx[lid + s], best_val[lid], best_idx[lid])) {
            best_val[lid] = best_val[lid + s];
            best_idx[lid] = best_idx[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        result[0] = select(best_idx[0], 0u, best_idx[0] == 0xFFFFFFFFu);
        result[1] = bitcast<u32>(best_val[0]);
    }
}
