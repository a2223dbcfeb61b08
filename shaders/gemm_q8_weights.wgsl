// The GPU GEMM's weight staging for Q8 g32 matrices (gemm_q4.wgsl): the BN tile rows'
// 64 values of step `g` (two 32-value groups), dequantized (w = scale · code, the
// group's f16 scale: q8_unpack.wgsl) into `ws`, 16 code words per tile row, WW words
// per invocation, consecutive invocations on consecutive words.

fn stage_weights(lid: u32, n0: u32, g: u32, outs_per_tile: u32) {
    let groups = K / 64u;
    for (var t = 0u; t < WW; t++) {
        // Code word `word` (of 16) of tile row `tr`.
        let i = lid + t * WG;
        let tr = i / 16u;
        let word = i % 16u;
        let row = tile_row(n0, tr, outs_per_tile);
        let c = codes[(row * groups + g) * 16u + word];
        ws[tr * KV4 + word] = tv(i8x4(c) * q8_scale(row * groups, 2u * g + word / 8u));
    }
}
