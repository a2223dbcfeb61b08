// The embedding gathers' row reader for Q8 g32 tables (embed_q4.wgsl, embed_prefill.wgsl):
// vec4 `i` of row `row` (one code word), dequantized (w = scale · code, its 32-value
// group's f16 scale: q8_unpack.wgsl).

fn row_vec4(row: u32, i: u32) -> vec4<f32> {
    let c = codes[row * (K / 4u) + i];
    return i8x4(c) * q8_scale(row * (K / 64u), i / 8u);
}
