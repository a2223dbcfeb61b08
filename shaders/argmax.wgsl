// Argmax over N logits: result[0] = the index of the largest value (the lowest index on
// ties; NaN never wins), result[1] = its f32 bits. One 256-wide workgroup.
// `mask` (constrained decoding): word 0 nonzero means only tokens whose bit is set in
// words 1.. (bit i % 32 of word 1 + i / 32) may win; word 0 zero means all may.
// With every token masked out the result is index 0 with value bits of -3.4e38.

override N: u32;

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> result: array<u32>;
@group(0) @binding(2) var<storage, read> mask: array<u32>;

var<workgroup> best_val: array<f32, 256>;
var<workgroup> best_idx: array<u32, 256>;

// Does (v, i) beat (bv, bi)? Larger value wins; equal values go to the lower index.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var bv = -3.4e38;
    var bi = 0xFFFFFFFFu;
    let masked = mask[0] != 0u;
    for (var i = lid; i < N; i += 256u) {
        let v = logits[i];
        let allowed = !masked || ((mask[1u + i / 32u] >> (i % 32u)) & 1u) != 0u;
        if (allowed && beats(v, i, bv, bi)) { // false for NaN
            bv = v;
            bi = i;
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
