// Q4 code unpacking (shared by the GEMV, the GEMM and the W_o fold of attention): a u32
// code word holds 8 values, value b < 4 in the low nibble of byte b (lo4), value 4 + b in
// its high nibble (hi4).

fn lo4(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(w & 0x0F0F0F0Fu));
}

fn hi4(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((w >> 4u) & 0x0F0F0F0Fu));
}
