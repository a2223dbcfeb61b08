// The lanes GEMM's x loads (appended to gemm_q4_lanes.wgsl) through the subgroup, when its
// 8-invocation workgroup is one subgroup of 8 (lavapipe): `load_x(kv, lane)` gives vec4s
// kv and kv + 1 of the tile's token rows 0..3 (x0) and 4..7 (x1), times the norm weights.
// Invocation `lane` loads token row `lane`'s two vec4s (and the norm weights of vec4
// kv + lane % 2), and subgroupBroadcast hands them to all. On lavapipe a load whose index
// is not a constant is an 8-lane gather, so every invocation loading all 16 vec4s cost as
// many gathers as the 8 rows' multiply-adds they feed.

fn load_x(kv: u32, lane: u32) -> array<X8, 2> {
    let at = (lane % 4u) * (K / 4u) + kv;
    let lo = select(x0[at], x1[at], lane >= 4u);
    let hi = select(x0[at + 1u], x1[at + 1u], lane >= 4u);
    let w = nw(kv + lane % 2u);
    let a = subgroupBroadcast(w, 0u);
    let b = subgroupBroadcast(w, 1u);
    return array<X8, 2>(
        X8(array<vec4<f32>, 4>(subgroupBroadcast(lo, 0u) * a, subgroupBroadcast(lo, 1u) * a,
                               subgroupBroadcast(lo, 2u) * a, subgroupBroadcast(lo, 3u) * a),
           array<vec4<f32>, 4>(subgroupBroadcast(hi, 0u) * b, subgroupBroadcast(hi, 1u) * b,
                               subgroupBroadcast(hi, 2u) * b, subgroupBroadcast(hi, 3u) * b)),
        X8(array<vec4<f32>, 4>(subgroupBroadcast(lo, 4u) * a, subgroupBroadcast(lo, 5u) * a,
                               subgroupBroadcast(lo, 6u) * a, subgroupBroadcast(lo, 7u) * a),
           array<vec4<f32>, 4>(subgroupBroadcast(hi, 4u) * b, subgroupBroadcast(hi, 5u) * b,
                               subgroupBroadcast(hi, 6u) * b, subgroupBroadcast(hi, 7u) * b)));
}
