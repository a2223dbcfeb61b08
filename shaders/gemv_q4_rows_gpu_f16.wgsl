// The GPU GEMV's x chunk in f16 (gemv_q4_rows_gpu.wgsl, with shader-f16; the wrapper puts
// `enable f16;` first): the lane's 32 values divided by their largest magnitude, so that
// the residual stream's large values cannot overflow f16, and dotted in f16 with the codes
// centred (code − 8: |Σ| ≤ 256, no cancellation against the group's minimum); the chunk's
// scale and the centring come back in f32.

const CODE_BIAS: f32 = 8.0;

struct ChunkX {
    v: array<vec4<f16>, 8>,
    scale: f32,
}

fn stage_x(x: array<vec4<f32>, 8>) -> ChunkX {
    var m = vec4<f32>(0.0);
    for (var i = 0u; i < 8u; i++) {
        m = max(m, abs(x[i]));
    }
    var c: ChunkX;
    c.scale = max(max(m.x, m.y), max(m.z, m.w));
    let inv = select(0.0, 1.0 / c.scale, c.scale > 0.0);
    for (var i = 0u; i < 8u; i++) {
        c.v[i] = vec4<f16>(x[i] * inv);
    }
    return c;
}

fn lo4h(w: u32) -> vec4<f16> {
    return vec4<f16>(unpack4xU8(w & 0x0F0F0F0Fu)) - vec4<f16>(8.0h);
}

fn hi4h(w: u32) -> vec4<f16> {
    return vec4<f16>(unpack4xU8((w >> 4u) & 0x0F0F0F0Fu)) - vec4<f16>(8.0h);
}

// Σ (code − 8) · x over the chunk.
fn chunk_dot(c: vec4<u32>, xc: ChunkX) -> f32 {
    let d = dot(lo4h(c.x), xc.v[0]) + dot(hi4h(c.x), xc.v[1])
          + dot(lo4h(c.y), xc.v[2]) + dot(hi4h(c.y), xc.v[3])
          + dot(lo4h(c.z), xc.v[4]) + dot(hi4h(c.z), xc.v[5])
          + dot(lo4h(c.w), xc.v[6]) + dot(hi4h(c.w), xc.v[7]);
    return f32(d) * xc.scale;
}
