// The GPU GEMM's weight staging for Q4 g64 matrices (gemm_q4.wgsl): the BN tile rows'
// 64 values of quant group `g`, dequantized (w = scale · code + min) into `ws`, 8 code
// words per tile row, WW words per invocation, consecutive invocations on consecutive
// words.

fn stage_weights(lid: u32, n0: u32, g: u32, outs_per_tile: u32) {
    let groups = K / 64u;
    for (var t = 0u; t < WW; t++) {
        // Code word `word` (of 8) of tile row `tr`.
        let i = lid + t * WG;
        let tr = i / 8u;
        let word = i % 8u;
        let row = tile_row(n0, tr, outs_per_tile);
        let c = codes[(row * groups + g) * 8u + word];
        let p = unpack2x16float(qparams[row * groups + g]);
        ws[tr * KV4 + 2u * word] = tv(lo4(c) * p.x + p.y);
        ws[tr * KV4 + 2u * word + 1u] = tv(hi4(c) * p.x + p.y);
    }
}
