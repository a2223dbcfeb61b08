// The RMSNorm factors of the chunk's token rows for the CPU-adapter GEMM
// (gemm_q4_lanes.wgsl): one invocation per row m writes 1 / sqrt(mean(x[m]²) + EPS) into
// the `scale` of m's tile (tiles of TOKENS rows, 64 floats apart; scale starts at float 4).
// `Chunk` (binding 0) comes from chunk.wgsl.

override K: u32;
override EPS: f32 = 1e-6;
override TOKENS: u32;

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> tiles: array<f32>;

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let m = (wid.x + wid.y * nwg.x) * 8u + lid;
    if (m >= chunk.count) {
        return;
    }
    var sum_sq = 0.0;
    for (var i = 0u; i < K / 4u; i++) {
        let v = x[m * (K / 4u) + i];
        sum_sq += dot(v, v);
    }
    tiles[(m / TOKENS) * 64u + 4u + m % TOKENS] = inverseSqrt(sum_sq / f32(K) + EPS);
}
