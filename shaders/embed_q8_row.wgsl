// The embedding gathers' row reader for Q8 g32 tables (embed_q4.wgsl, embed_prefill.wgsl):
// vec4 `i` of row `row` (one code word), dequantized (w = scale · code, its 32-value
// group's f16 scale, the even group's in the low half; i8x4: q8_unpack.wgsl; words
// through embed_parts.wgsl).

fn row_vec4(row: u32, i: u32) -> vec4<f32> {
    let s = unpack2x16float(param_word(row, K / 64u, i / 16u));
    let scale = select(s.x, s.y, ((i / 8u) & 1u) == 1u);
    return i8x4(code_word(row, K / 4u, i)) * scale;
}
