// The embedding gathers' row reader for Q4 g64 tables (embed_q4.wgsl, embed_prefill.wgsl):
// vec4 `i` of row `row`, dequantized (w = scale · code + min; a code word holds 8 values,
// lo4 the first 4, hi4 the next: q4_unpack.wgsl; words through embed_parts.wgsl).

fn row_vec4(row: u32, i: u32) -> vec4<f32> {
    let c = code_word(row, K / 8u, i / 2u);
    let p = unpack2x16float(param_word(row, K / 64u, i / 16u));
    let v = select(lo4(c), hi4(c), (i & 1u) == 1u);
    return v * p.x + p.y;
}
