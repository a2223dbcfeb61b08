// Q4 g64 GEMV, the CPU-adapter design (lavapipe, SwiftShader): each invocation computes
// ROWS output rows (its ROWS · PARTS slots, matrix rows strided by the workgroup size),
// reading codes and qparams from the texture in tile order (q4_tile_common.wgsl): the
// workgroup streams its block sequentially. No workgroup memory, no barriers. Per group
// of 64 the x values are loaded once (by every invocation, or shared through the
// subgroup: gemv_q4_xgroup_lanes.wgsl), pre-scaled for dot32_scaled, and reused by every
// slot.
//
// Every slot has its own variables, written out by the wrapper (gemv_q4.rs): the lines
// between `//#slots` and `//#end slots` once per slot ($k the slot), those between
// `//#groups` and `//#end groups` once per group of a chunk ($j), those between `//#rows`
// and `//#end rows` once per output row ($i, its gate slot $g and up slot $u), and the
// group's x loads (gemv_q4_xgroup.wgsl, or gemv_q4_xgroup_lanes.wgsl through the
// subgroup, which also declares `sid`, the subgroup invocation id, at `//#subgroup_lane`)
// in place of `//#x_group`. On lavapipe an accumulator array indexed by a loop counter
// lives in memory, read and written lane by lane.

// Σ W·x over one group of 64 of one slot: code texels `at` and `at + 1`, qparams `q`.
fn group_dot(at: u32, q: u32, xsum: f32,
             s0: vec4<f32>, s1: vec4<f32>, s2: vec4<f32>, s3: vec4<f32>,
             s4: vec4<f32>, s5: vec4<f32>, s6: vec4<f32>, s7: vec4<f32>,
             s8: vec4<f32>, s9: vec4<f32>, sa: vec4<f32>, sb: vec4<f32>,
             sc: vec4<f32>, sd: vec4<f32>, se: vec4<f32>, sf: vec4<f32>) -> f32 {
    let d = dot32_scaled(tile_texel(at), s0, s1, s2, s3, s4, s5, s6, s7)
          + dot32_scaled(tile_texel(at + 1u), s8, s9, sa, sb, sc, sd, se, sf);
    let p = unpack2x16float(q);
    return p.x * d + p.y * xsum;
}

@compute @workgroup_size(TILE_WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32
//#subgroup_lane
        ) {
    let block = wid.x + wid.y * nwg.x;
    let first = block * TILE_WG * ROWS;
    store_residual(first == 0u, lid, TILE_WG);
    if (first >= N) {
        return;
    }
//#slots
    var acc$k = 0.0;
//#end slots
    var sum_sq = 0.0; // Σx² (NORM), summed by the x_group loads
    for (var chunk = 0u; chunk < K / 64u / TILE_QPT; chunk++) {
        let base = block * TILE_BLOCK + chunk * TILE_CHUNK;
//#slots
        let q$k = tile_texel(base + $ku * TILE_WG + lid);
//#end slots
//#groups
        {
            let xb = 16u * (chunk * TILE_QPT + $ju);
//#x_group
            let at = base + TILE_SLOTS + $ju * 2u * TILE_SLOTS + 2u * lid;
//#slots
            acc$k += group_dot(at + $ku * 2u * TILE_WG, q$k[$j], xsum,
                               s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, sa, sb, sc, sd, se, sf);
//#end slots
        }
//#end groups
    }
    let scale = rms_scale(sum_sq);
//#rows
    if (first + $iu * TILE_WG + lid < N) {
        finish(first + $iu * TILE_WG + lid, scale * acc$g, scale * acc$u);
    }
//#end rows
}
