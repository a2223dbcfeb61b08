// Q8 code unpacking (shared by the Q8 GEMV, GEMM and embedding gather): a u32 code word
// holds 4 consecutive values, value b in byte b as a two's-complement int8. Shifts
// rather than unpack4xI8, which belongs to a WGSL language extension Safari does not
// advertise.

fn i8x4(w: u32) -> vec4<f32> {
    let up = bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u));
    return vec4<f32>(up >> vec4<u32>(24u));
}

// The f16 scale of 32-value group `g` of a row whose scale words start at `word0`
// (group 2j in the low half of word j, 2j + 1 in the high half).
fn q8_scale(word0: u32, g: u32) -> f32 {
    let s = unpack2x16float(qparams[word0 + g / 2u]);
    return select(s.x, s.y, (g & 1u) == 1u);
}
