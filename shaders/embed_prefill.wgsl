// Batched embedding gather for prefill: out[t] = row tokens[t] of a Q4 g64 or Q8 g32
// matrix [VOCAB][K], dequantized (`row_vec4`, as in embed_q4.wgsl), for the chunk's
// tokens. One invocation per (token, vec4).

override K: u32;

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl.
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> qparams: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let vecs = K / 4u;
    let idx = (wid.x + wid.y * nwg.x) * 64u + lid;
    let t = idx / vecs;
    if (t >= chunk.count) {
        return;
    }
    out[idx] = row_vec4(tokens[t], idx % vecs);
}
