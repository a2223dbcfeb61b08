// Embedding gather: out = row `token` of a Q4 g64 or Q8 g32 matrix [VOCAB][K], dequantized
// (`row_vec4`: embed_q4_row.wgsl or embed_q8_row.wgsl, as the table is stored), where
// `token` is `step.token`, or with step.token = TOKEN_ON_GPU the previous step's argmax
// (`prev[0]`: decode pipelined one step ahead reads its input token on the GPU; an index
// outside the vocabulary, from logits that were all NaN, reads row 0).
// Each invocation expands every 64th vec4.

override K: u32;
override VOCAB: u32;
const TOKEN_ON_GPU: u32 = 0xFFFFFFFFu;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> codes: array<u32>;
@group(0) @binding(2) var<storage, read> qparams: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> prev: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    var token = step.token;
    if (token == TOKEN_ON_GPU) {
        token = select(0u, prev[0], prev[0] < VOCAB);
    }
    for (var i = lid; i < K / 4u; i += 64u) {
        let v = row_vec4(token, i);
        let o = 4u * i;
        out[o] = v.x;
        out[o + 1u] = v.y;
        out[o + 2u] = v.z;
        out[o + 3u] = v.w;
    }
}
