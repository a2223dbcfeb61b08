// Reading a codes texture in tile order (q4_tile_common.wgsl), bound as `codes`, through
// `tile_texel(i)` (texel i; written by the wrapper, TileLayout::read_wgsl).

// Code texel i of the row-major codes (32 codes; row r holds TILE_K / 32), found in the
// tile: for readers with other access orders (the batched prefill GEMM).
fn code4(i: u32) -> vec4<u32> {
    let r = i / (TILE_K / 32u);
    let c = i % (TILE_K / 32u);
    let o = r % TILE_N;
    let rem = o % (TILE_ROWS * TILE_WG);
    let k = (rem / TILE_WG) * TILE_PARTS + r / TILE_N;
    let g = c / 2u;
    return tile_texel((o / (TILE_ROWS * TILE_WG)) * TILE_BLOCK + (g / TILE_QPT) * TILE_CHUNK
        + TILE_SLOTS + (g % TILE_QPT) * 2u * TILE_SLOTS + (k * TILE_WG + rem % TILE_WG) * 2u
        + c % 2u);
}
