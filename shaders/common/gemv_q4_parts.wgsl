// The GEMV prologue that adds partial vectors to x (prepended by gemv_q4.rs when
// `GemvSpec::add_parts` > 0, after `const ADD_PARTS`): the input is
//   x_in = x + Σ_{p < ADD_PARTS} add_vecs[p]     (ADD_PARTS × K floats)
// (the attention heads' W_o shares added to the residual), for the norm's Σx² and the dot
// products alike; one workgroup stores x_in to h_out, the next residual buffer.

// The wrapper declares the parts as `add_vecs` (binding 6: uniform or storage vec4s).
@group(0) @binding(7) var<storage, read_write> h_out: array<vec4<f32>>;

fn x_in(i: u32) -> vec4<f32> {
    var v = x[i];
    for (var p = 0u; p < ADD_PARTS; p++) {
        v += add_vecs[p * (K / 4u) + i];
    }
    return v;
}

// Workgroup `first` (the caller's first workgroup) stores x_in to h_out, its invocations
// `lid` taking every `stride`-th vec4. Nothing in the dispatch reads h_out.
fn store_residual(first: bool, lid: u32, stride: u32) {
    if (first) {
        for (var i = lid; i < K / 4u; i += stride) {
            h_out[i] = x_in(i);
        }
    }
}
