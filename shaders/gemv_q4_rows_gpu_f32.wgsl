// The GPU GEMV's x chunk in f32 (gemv_q4_rows_gpu.wgsl): the lane's 32 values as loaded,
// dotted with the codes as they are (0..15).

const CODE_BIAS: f32 = 0.0;

struct ChunkX {
    v: array<vec4<f32>, 8>,
}

fn stage_x(x: array<vec4<f32>, 8>) -> ChunkX {
    return ChunkX(x);
}

// Σ code · x over the chunk.
fn chunk_dot(c: vec4<u32>, xc: ChunkX) -> f32 {
    return dot32(c, xc.v[0], xc.v[1], xc.v[2], xc.v[3], xc.v[4], xc.v[5], xc.v[6], xc.v[7]);
}
