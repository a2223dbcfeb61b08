// Q4 g64 GEMM for prefill: Y[M][N] = X[M][K] · Wᵀ (+ bias) for the chunk's M = chunk.count
// token rows, with the GEMV's fused RMSNorm prologue and epilogues (gemv_q4_common.wgsl
// explains them; W, codes and qparams are laid out alike).
//
// Tiling: one 64-invocation workgroup computes a BM × BN tile (32 token rows × 32 matrix
// rows; for SwiGLU 16 gate rows and their 16 up rows), one quant group (BK = 64 values) per
// step. Per step invocation lid loads half a token row (8 vec4 of x, × norm weights) and
// dequantizes half a matrix row (32 weights) into workgroup memory; after a barrier each
// invocation accumulates a 4 × 4 block — token rows 4·ty + i, tile columns tx + 8·j —
// in four vec4 registers (no private arrays: on CPU-backed adapters those become
// per-lane memory). Lanes of one SIMD batch share ty, so their x loads are broadcasts.
// The loaders of token row r also sum r's x² for the fused norm.

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl; the constants, lo4/hi4 and
// `finish` from gemm_q4_common.wgsl.
@group(0) @binding(1) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qparams: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const BM: u32 = 32u;
const BN: u32 = 32u;
// BK / 4: vec4s per tile row.
const KV4: u32 = 16u;

var<workgroup> xs: array<vec4<f32>, 512>; // [BM][KV4]
var<workgroup> ws: array<vec4<f32>, 512>; // [BN][KV4]
// After the K loop, xs[i].x holds loader i's half-row sum of x² (the fused norm), so the
// workgroup stays within WebGPU's default 16 KiB of workgroup storage.

// The four sums of token row `m` (tile columns tx + 8·j in acc's components).
fn write_row(m: u32, n0: u32, tx: u32, acc: vec4<f32>, scale: f32) {
    let a = acc * scale;
    if (EPILOGUE == 2u) {
        // Columns j = 0, 1 are gate rows, j = 2, 3 their up rows.
        if (n0 + tx < N) {
            finish(m, n0 + tx, a.x, a.z);
        }
        if (n0 + tx + 8u < N) {
            finish(m, n0 + tx + 8u, a.y, a.w);
        }
    } else {
        for (var j = 0u; j < 4u; j++) {
            let o = n0 + tx + 8u * j;
            if (o < N) {
                finish(m, o, a[j], 0.0);
            }
        }
    }
}

fn row_scale(r: u32) -> f32 {
    if (NORM) {
        return inverseSqrt((xs[2u * r].x + xs[2u * r + 1u].x) / f32(K) + EPS);
    }
    return 1.0;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let count = chunk.count;
    let outs_per_tile = BN / parts();
    let n0 = wid.x * outs_per_tile;
    let m0 = wid.y * BM;
    let tx = lid % 8u;
    let ty = lid / 8u;
    // This invocation's loads: half (lid % 2) of token row m0 + lid / 2 and of matrix row
    // `w_row` (clamped: rows past the ends repeat the last one and are never written).
    let hb = lid % 2u;
    let x_row = min(m0 + lid / 2u, max(count, 1u) - 1u);
    let w_tile_row = lid / 2u;
    let part = w_tile_row / outs_per_tile;
    let w_row = min(n0 + w_tile_row % outs_per_tile, N - 1u) + part * N;
    let groups = K / 64u;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    var sum_sq = 0.0;
    for (var g = 0u; g < groups; g++) {
        let xb = x_row * (K / 4u) + g * KV4 + hb * 8u;
        for (var j = 0u; j < 8u; j++) {
            var v = x[xb + j];
            sum_sq += dot(v, v);
            if (NORM) {
                v *= norm_w[g * KV4 + hb * 8u + j];
            }
            xs[(lid / 2u) * KV4 + hb * 8u + j] = v;
        }
        let c = codes[(w_row * groups + g) * 2u + hb];
        let p = unpack2x16float(qparams[w_row * groups + g]);
        let wb = w_tile_row * KV4 + hb * 8u;
        ws[wb] = lo4(c.x) * p.x + p.y;
        ws[wb + 1u] = hi4(c.x) * p.x + p.y;
        ws[wb + 2u] = lo4(c.y) * p.x + p.y;
        ws[wb + 3u] = hi4(c.y) * p.x + p.y;
        ws[wb + 4u] = lo4(c.z) * p.x + p.y;
        ws[wb + 5u] = hi4(c.z) * p.x + p.y;
        ws[wb + 6u] = lo4(c.w) * p.x + p.y;
        ws[wb + 7u] = hi4(c.w) * p.x + p.y;
        workgroupBarrier();
        let xr = ty * 4u * KV4;
        for (var kk = 0u; kk < KV4; kk++) {
            let a0 = xs[xr + kk];
            let a1 = xs[xr + KV4 + kk];
            let a2 = xs[xr + 2u * KV4 + kk];
            let a3 = xs[xr + 3u * KV4 + kk];
            let b0 = ws[tx * KV4 + kk];
            let b1 = ws[(tx + 8u) * KV4 + kk];
            let b2 = ws[(tx + 16u) * KV4 + kk];
            let b3 = ws[(tx + 24u) * KV4 + kk];
            acc0 += vec4<f32>(dot(a0, b0), dot(a0, b1), dot(a0, b2), dot(a0, b3));
            acc1 += vec4<f32>(dot(a1, b0), dot(a1, b1), dot(a1, b2), dot(a1, b3));
            acc2 += vec4<f32>(dot(a2, b0), dot(a2, b1), dot(a2, b2), dot(a2, b3));
            acc3 += vec4<f32>(dot(a3, b0), dot(a3, b1), dot(a3, b2), dot(a3, b3));
        }
        workgroupBarrier();
    }
    // The loop ended with a barrier: xs is free.
    xs[lid].x = sum_sq;
    workgroupBarrier();
    let r = ty * 4u;
    if (m0 + r < count) {
        write_row(m0 + r, n0, tx, acc0, row_scale(r));
    }
    if (m0 + r + 1u < count) {
        write_row(m0 + r + 1u, n0, tx, acc1, row_scale(r + 1u));
    }
    if (m0 + r + 2u < count) {
        write_row(m0 + r + 2u, n0, tx, acc2, row_scale(r + 2u));
    }
    if (m0 + r + 3u < count) {
        write_row(m0 + r + 3u, n0, tx, acc3, row_scale(r + 3u));
    }
}
