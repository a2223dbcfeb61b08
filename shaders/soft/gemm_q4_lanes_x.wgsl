// The lanes GEMM's x loads (appended to gemm_q4_lanes.wgsl) when every invocation loads
// them all: `load_x(kv, lane)` gives vec4s kv and kv + 1 of the tile's token rows 0..3
// (x0) and 4..7 (x1), times the norm weights (`lane` unused).

fn load_x(kv: u32, lane: u32) -> array<X8, 2> {
    let s = K / 4u;
    let a = nw(kv);
    let b = nw(kv + 1u);
    return array<X8, 2>(
        X8(array<vec4<f32>, 4>(x0[kv] * a, x0[s + kv] * a, x0[2u * s + kv] * a,
                               x0[3u * s + kv] * a),
           array<vec4<f32>, 4>(x0[kv + 1u] * b, x0[s + kv + 1u] * b, x0[2u * s + kv + 1u] * b,
                               x0[3u * s + kv + 1u] * b)),
        X8(array<vec4<f32>, 4>(x1[kv] * a, x1[s + kv] * a, x1[2u * s + kv] * a,
                               x1[3u * s + kv] * a),
           array<vec4<f32>, 4>(x1[kv + 1u] * b, x1[s + kv + 1u] * b, x1[2u * s + kv + 1u] * b,
                               x1[3u * s + kv + 1u] * b)));
}
