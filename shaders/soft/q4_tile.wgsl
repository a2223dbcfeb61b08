// Repack a Q4 g64 matrix (codes and qparams, gemv_q4_common.wgsl's layout) into the tile
// order the CPU-adapter GEMV reads (kernels/q4_tiles.rs explains it): one invocation per
// tile texel, written to a storage buffer that is then copied into the texture.
// The TILE_* constants are declared by the wrapper.

@group(0) @binding(0) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> qparams: array<u32>;
@group(0) @binding(2) var<storage, read_write> tile: array<vec4<u32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (t >= TILE_TEXELS) {
        return;
    }
    let groups = TILE_K / 64u;
    let block = t / TILE_BLOCK;
    let chunk = (t % TILE_BLOCK) / TILE_CHUNK;
    let at = t % TILE_CHUNK;
    if (at < TILE_SLOTS) {
        // The qparams of TILE_QPT groups of one matrix row (unused components 0).
        let r = tile_row(block, at);
        var q = vec4<u32>(0u);
        for (var j = 0u; j < TILE_QPT; j++) {
            q[j] = qparams[r * groups + chunk * TILE_QPT + j];
        }
        tile[t] = q;
    } else {
        // Half h of group j of the chunk, for the slot at (at - SLOTS) % (2 · SLOTS) / 2.
        let c = at - TILE_SLOTS;
        let j = c / (2u * TILE_SLOTS);
        let s = c % (2u * TILE_SLOTS);
        let r = tile_row(block, s / 2u);
        tile[t] = codes[r * (TILE_K / 32u) + 2u * (chunk * TILE_QPT + j) + s % 2u];
    }
}
