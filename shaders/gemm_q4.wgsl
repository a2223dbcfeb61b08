// Q4 g64 GEMM for prefill: Y[M][N] = X[M][K] · Wᵀ (+ bias) for the chunk's M = chunk.count
// token rows, with the GEMV's fused RMSNorm prologue and epilogues (gemv_q4_common.wgsl
// explains them; W, codes and qparams are laid out alike).
//
// Tiling: one 64-invocation workgroup computes a BM × BN tile (64 token rows × 64 matrix
// rows; for SwiGLU 32 gate rows and their 32 up rows). Per K step of BK = 32 values (half
// a quant group) every invocation loads one token row's 32 x values (× norm weights) and
// dequantizes one matrix row's 32 weights into workgroup memory; after a barrier each
// invocation accumulates an 8 × 8 block: token rows 8·ty + i, tile columns tx + 8·j
// (lanes of one SIMD batch share ty, so their x loads are broadcasts). K is a multiple of
// 64 (the quant group), so always of BK. The loader of token row r also sums r's x² for
// the fused norm and publishes the rms factor at the end.

override N: u32;
override K: u32;
override EPILOGUE: u32 = 0u;
override HAS_BIAS: bool = false;
override NORM: bool = false;
override EPS: f32 = 1e-6;

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl.
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qparams: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const BM: u32 = 64u;
const BN: u32 = 64u;
// BK / 4: vec4s per tile row.
const KV4: u32 = 8u;

var<workgroup> xs: array<vec4<f32>, 512>; // [BM][KV4]
var<workgroup> ws: array<vec4<f32>, 512>; // [BN][KV4]
var<workgroup> row_scale: array<f32, 64>;

fn parts() -> u32 {
    return select(1u, 2u, EPILOGUE == 2u);
}

fn lo4(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(w & 0x0F0F0F0Fu));
}

fn hi4(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((w >> 4u) & 0x0F0F0F0Fu));
}

// Write output (m, o) from its matrix-row sums (up unused unless SwiGLU).
fn finish(m: u32, o: u32, gate_in: f32, up_in: f32) {
    var g = gate_in;
    var u = up_in;
    if (HAS_BIAS) {
        g += bias[o];
        if (EPILOGUE == 2u) {
            u += bias[o + N];
        }
    }
    let i = m * N + o;
    if (EPILOGUE == 1u) {
        out[i] = out[i] + g;
    } else if (EPILOGUE == 2u) {
        out[i] = g / (1.0 + exp(-g)) * u;
    } else {
        out[i] = g;
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let count = chunk.count;
    let outs_per_tile = BN / parts();
    let n0 = wid.x * outs_per_tile;
    let m0 = wid.y * BM;
    let tx = lid % 8u;
    let ty = lid / 8u;
    // This invocation's loads: token row m0 + lid and matrix row `w_row` (clamped:
    // rows past the ends repeat the last one and are never written).
    let x_row = min(m0 + lid, max(count, 1u) - 1u);
    let part = lid / outs_per_tile;
    let w_row = min(n0 + lid % outs_per_tile, N - 1u) + part * N;
    let k32 = K / 32u;
    var acc: array<f32, 64>;
    for (var s = 0u; s < 64u; s++) {
        acc[s] = 0.0;
    }
    var sum_sq = 0.0;
    for (var kt = 0u; kt < k32; kt++) {
        for (var j = 0u; j < KV4; j++) {
            var v = x[x_row * (K / 4u) + kt * KV4 + j];
            sum_sq += dot(v, v);
            if (NORM) {
                v *= norm_w[kt * KV4 + j];
            }
            xs[lid * KV4 + j] = v;
        }
        let c = codes[w_row * k32 + kt];
        let p = unpack2x16float(qparams[w_row * (K / 64u) + kt / 2u]);
        let wb = lid * KV4;
        ws[wb] = lo4(c.x) * p.x + p.y;
        ws[wb + 1u] = hi4(c.x) * p.x + p.y;
        ws[wb + 2u] = lo4(c.y) * p.x + p.y;
        ws[wb + 3u] = hi4(c.y) * p.x + p.y;
        ws[wb + 4u] = lo4(c.z) * p.x + p.y;
        ws[wb + 5u] = hi4(c.z) * p.x + p.y;
        ws[wb + 6u] = lo4(c.w) * p.x + p.y;
        ws[wb + 7u] = hi4(c.w) * p.x + p.y;
        workgroupBarrier();
        for (var kk = 0u; kk < KV4; kk++) {
            var a: array<vec4<f32>, 8>;
            for (var i = 0u; i < 8u; i++) {
                a[i] = xs[(ty * 8u + i) * KV4 + kk];
            }
            for (var j = 0u; j < 8u; j++) {
                let b = ws[(tx + 8u * j) * KV4 + kk];
                for (var i = 0u; i < 8u; i++) {
                    acc[i * 8u + j] += dot(a[i], b);
                }
            }
        }
        workgroupBarrier();
    }
    row_scale[lid] = select(1.0, inverseSqrt(sum_sq / f32(K) + EPS), NORM);
    workgroupBarrier();
    for (var i = 0u; i < 8u; i++) {
        let r = ty * 8u + i;
        let m = m0 + r;
        if (m >= count) {
            break;
        }
        let scale = row_scale[r];
        if (EPILOGUE == 2u) {
            for (var j = 0u; j < 4u; j++) {
                let o = n0 + tx + 8u * j;
                if (o < N) {
                    finish(m, o, scale * acc[i * 8u + j], scale * acc[i * 8u + j + 4u]);
                }
            }
        } else {
            for (var j = 0u; j < 8u; j++) {
                let o = n0 + tx + 8u * j;
                if (o < N) {
                    finish(m, o, scale * acc[i * 8u + j], 0.0);
                }
            }
        }
    }
}
