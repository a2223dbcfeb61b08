// Embedding gather: out = row `token` of a Q4 g64 matrix [VOCAB][K], dequantized, where
// `token` is `step.token`, or with step.token = TOKEN_ON_GPU the previous step's argmax
// (`prev[0]`: decode pipelined one step ahead reads its input token on the GPU; an index
// outside the vocabulary, from logits that were all NaN, reads row 0).
// Each invocation expands code words (8 values each); w = scale · code + min.

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
    let words = K / 8u;
    var token = step.token;
    if (token == TOKEN_ON_GPU) {
        token = select(0u, prev[0], prev[0] < VOCAB);
    }
    let row_words = token * words;
    let row_groups = token * (K / 64u);
    for (var w = lid; w < words; w += 64u) {
        let c = codes[row_words + w];
        let p = unpack2x16float(qparams[row_groups + w / 8u]);
        let lo = vec4<f32>(unpack4xU8(c & 0x0F0F0F0Fu));
        let hi = vec4<f32>(unpack4xU8((c >> 4u) & 0x0F0F0F0Fu));
        let a = lo * p.x + p.y;
        let b = hi * p.x + p.y;
        let o = 8u * w;
        out[o] = a.x;
        out[o + 1u] = a.y;
        out[o + 2u] = a.z;
        out[o + 3u] = a.w;
        out[o + 4u] = b.x;
        out[o + 5u] = b.y;
        out[o + 6u] = b.z;
        out[o + 7u] = b.w;
    }
}
