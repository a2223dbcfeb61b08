// Q4 g64 GEMV, the CPU-adapter design (lavapipe, SwiftShader): each invocation computes
// ROWS output rows (its ROWS · PARTS slots, matrix rows strided by the workgroup size),
// reading codes and qparams from the texture in tile order (q4_tile_common.wgsl): the
// workgroup streams its block sequentially. No workgroup memory, no barriers. Per group
// of 64 the x values are loaded once (uniform loads: one scalar load, not one per lane),
// pre-scaled for dot32_scaled, and reused by every slot.
//
// Every slot has its own variables, written out by the wrapper (gemv_q4.rs): the lines
// between `//#slots` and `//#end slots` once per slot ($k the slot), those between
// `//#groups` and `//#end groups` once per group of a chunk ($j), those between `//#rows`
// and `//#end rows` once per output row ($i, its gate slot $g and up slot $u). On
// lavapipe an accumulator array indexed by a loop counter lives in memory, read and
// written lane by lane.

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
        @builtin(local_invocation_index) lid: u32) {
    let block = wid.x + wid.y * nwg.x;
    let first = block * TILE_WG * ROWS;
    store_residual(first == 0u, lid, TILE_WG);
    if (first >= N) {
        return;
    }
//#slots
    var acc$k = 0.0;
//#end slots
    for (var chunk = 0u; chunk < K / 64u / TILE_QPT; chunk++) {
        let base = block * TILE_BLOCK + chunk * TILE_CHUNK;
//#slots
        let q$k = tile_texel(base + $ku * TILE_WG + lid);
//#end slots
//#groups
        {
            let xb = 16u * (chunk * TILE_QPT + $ju);
            let x0 = xn(xb); let x1 = xn(xb + 1u); let x2 = xn(xb + 2u); let x3 = xn(xb + 3u);
            let x4 = xn(xb + 4u); let x5 = xn(xb + 5u); let x6 = xn(xb + 6u); let x7 = xn(xb + 7u);
            let x8 = xn(xb + 8u); let x9 = xn(xb + 9u); let xa = xn(xb + 10u); let xbb = xn(xb + 11u);
            let xc = xn(xb + 12u); let xd = xn(xb + 13u); let xe = xn(xb + 14u); let xf = xn(xb + 15u);
            let xsum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7
                         + x8 + x9 + xa + xbb + xc + xd + xe + xf, vec4<f32>(1.0));
            let s0 = x0 * X_SCALE; let s1 = x1 * X_SCALE; let s2 = x2 * X_SCALE; let s3 = x3 * X_SCALE;
            let s4 = x4 * X_SCALE; let s5 = x5 * X_SCALE; let s6 = x6 * X_SCALE; let s7 = x7 * X_SCALE;
            let s8 = x8 * X_SCALE; let s9 = x9 * X_SCALE; let sa = xa * X_SCALE; let sb = xbb * X_SCALE;
            let sc = xc * X_SCALE; let sd = xd * X_SCALE; let se = xe * X_SCALE; let sf = xf * X_SCALE;
            let at = base + TILE_SLOTS + $ju * 2u * TILE_SLOTS + 2u * lid;
//#slots
            acc$k += group_dot(at + $ku * 2u * TILE_WG, q$k[$j], xsum,
                               s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, sa, sb, sc, sd, se, sf);
//#end slots
        }
//#end groups
    }
    var sum_sq = 0.0;
    if (NORM) {
        for (var i = 0u; i < K / 4u; i++) {
            let v = x_in(i);
            sum_sq += dot(v, v);
        }
    }
    let scale = rms_scale(sum_sq);
//#rows
    if (first + $iu * TILE_WG + lid < N) {
        finish(first + $iu * TILE_WG + lid, scale * acc$g, scale * acc$u);
    }
//#end rows
}
