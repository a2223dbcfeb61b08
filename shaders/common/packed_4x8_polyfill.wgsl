// unpack4xU8 without WGSL's packed_4x8_integer_dot_product language extension (Safari):
// byte b of w in component b, by shifts and masks (appended by kernels::wgsl_compat).

fn u8x4_unpacked(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}
