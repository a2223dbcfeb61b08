// The tile order of a Q4 matrix's codes texture on CPU adapters (kernels/q4_tiles.rs),
// after the TILE_* constants (prepended by the wrapper).
//
// A block holds the TILE_SLOTS = TILE_ROWS · TILE_PARTS · TILE_WG matrix rows one GEMV
// workgroup computes; slot k · TILE_WG + lane is invocation `lane`'s k-th row (k = i ·
// PARTS + p: output row block · ROWS · WG + i · WG + lane, matrix part p; rows past N
// repeat row N - 1). Per chunk of TILE_QPT groups of 64 codes, a block stores
//   [slot] one texel of the slot's QPT qparams (u32 each, unused components 0),
//   then per group j of the chunk: [slot][half] the slot's two code texels,
// so a workgroup reads its weights as one sequential stream, neighbouring invocations
// neighbouring texels.

// The matrix row at slot position `at` (slot · TILE_WG + lane) of block `block`.
fn tile_row(block: u32, at: u32) -> u32 {
    let k = at / TILE_WG;
    let lane = at % TILE_WG;
    let o = min(block * TILE_ROWS * TILE_WG + (k / TILE_PARTS) * TILE_WG + lane, TILE_N - 1u);
    return o + (k % TILE_PARTS) * TILE_N;
}
