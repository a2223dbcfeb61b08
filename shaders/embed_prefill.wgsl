// Batched embedding gather for prefill: out[t] = row tokens[t] of a Q4 g64 matrix
// [VOCAB][K], dequantized, for the chunk's tokens. One invocation per (token, code word of
// 8 values); w = scale · code + min (as embed_q4.wgsl).

override K: u32;

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl.
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> qparams: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let words = K / 8u;
    let idx = (wid.x + wid.y * nwg.x) * 64u + lid;
    let t = idx / words;
    let w = idx % words;
    if (t >= chunk.count) {
        return;
    }
    let token = tokens[t];
    let c = codes[token * words + w];
    let p = unpack2x16float(qparams[token * (K / 64u) + w / 8u]);
    let lo = vec4<f32>(unpack4xU8(c & 0x0F0F0F0Fu));
    let hi = vec4<f32>(unpack4xU8((c >> 4u) & 0x0F0F0F0Fu));
    out[2u * idx] = lo * p.x + p.y;
    out[2u * idx + 1u] = hi * p.x + p.y;
}
