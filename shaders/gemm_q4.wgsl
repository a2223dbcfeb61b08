// Q4 g64 / Q8 g32 GEMM for prefill on GPUs: Y[M][N] = X[M][K] · Wᵀ (+ bias) for the chunk's
// M = chunk.count token rows, with the GEMV's fused RMSNorm prologue and epilogues
// (gemv_q4_common.wgsl explains them; W, codes and qparams are laid out alike).
//
// Register tiling (after ggml-webgpu's mul_mat_reg_tile): a workgroup of WG invocations
// computes BM token rows × BN matrix rows (for SwiGLU BN/2 gate rows and their BN/2 up
// rows), one quant group (64 values) per step. Per step, x's BM × 64 values (× norm
// weights) and the BN rows' dequantized weights are staged in workgroup memory as `tv`
// (vec4 of f32, or of f16 with shader-f16: gemm_q4_f32.wgsl / gemm_q4_f16.wgsl); after a
// barrier invocation (tx, ty) accumulates token rows TM·ty + i (i < TM) × tile columns
// tx + (BN/TN)·j (j < TN) in f32 registers, each staged vec4 loaded once for TN or TM
// products. The products are f32 whatever the staging (f16 × f16 is exact in f32): f16
// dot products put the fixtures' logits ~1.6× further from the oracle. Loads: XS invocations per token row, each 16/XS consecutive vec4s of x (and
// its Σx² for the fused norm); WW code words per invocation, consecutive invocations on
// consecutive words (coalesced). Rows past the ends repeat the last one, never written.
// PRESCALE (the f16 tiles): each loader finds its token row's RMSNorm factor first, from
// a pass over the row's x, and applies it before staging, so that the raw residual
// stream (which passes f16's range in real models) is never held in f16.
// The weights' staging (`stage_weights`: WW code words per invocation) comes from
// gemm_q4_weights.wgsl or gemm_q8_weights.wgsl, as the matrix is stored.
// The wrapper (GemmTiles::wgsl) declares BM, BN, TM, TN, WG, XS and WW.

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl; the constants, lo4/hi4 and
// `finish` from gemm_q4_common.wgsl.
@group(0) @binding(1) var<storage, read> codes: array<u32>;
@group(0) @binding(2) var<storage, read> qparams: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// vec4s per staged row (one quant group).
const KV4: u32 = 16u;
// Invocations along the matrix rows; vec4s of x per loader.
const CN: u32 = BN / TN;
const XV: u32 = KV4 / XS;

var<workgroup> xs: array<tv, BM * KV4>;
var<workgroup> ws: array<tv, BN * KV4>;

// The matrix row of tile row `tr` (for SwiGLU: gate rows, then their up rows); rows past
// N repeat the last.
fn tile_row(n0: u32, tr: u32, outs_per_tile: u32) -> u32 {
    let part = tr / outs_per_tile;
    return min(n0 + tr % outs_per_tile, N - 1u) + part * N;
}

// Token row `m`'s sums (tile columns tx + CN·j in a[j]).
fn write_row(m: u32, n0: u32, tx: u32, acc: array<f32, TN>, scale: f32) {
    if (EPILOGUE == 2u) {
        // Columns j < TN/2 are gate rows, j + TN/2 their up rows.
        for (var j = 0u; j < TN / 2u; j++) {
            let o = n0 + tx + CN * j;
            if (o < N) {
                finish(m, o, acc[j] * scale, acc[j + TN / 2u] * scale);
            }
        }
    } else {
        for (var j = 0u; j < TN; j++) {
            let o = n0 + tx + CN * j;
            if (o < N) {
                finish(m, o, acc[j] * scale, 0.0);
            }
        }
    }
}

// Tile row r's RMSNorm factor from its XS loaders' Σx² (1 without NORM).
fn row_scale(r: u32) -> f32 {
    if (NORM) {
        var s = 0.0;
        for (var i = 0u; i < XS; i++) {
            s += get_sum(r * XS + i);
        }
        return inverseSqrt(s / f32(K) + EPS);
    }
    return 1.0;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let count = chunk.count;
    let outs_per_tile = BN / parts();
    let n0 = wid.x * outs_per_tile;
    let m0 = wid.y * BM;
    let tx = lid % CN;
    let ty = lid / CN;
    // This invocation's x loads: vec4s xc .. xc + XV of tile row xr.
    let xr = lid / XS;
    let xc = (lid % XS) * XV;
    let x_row = min(m0 + xr, max(count, 1u) - 1u);
    let groups = K / 64u;
    var acc: array<array<f32, TN>, TM>;
    var sum_sq = 0.0;
    var x_scale = 1.0;
    if (NORM && PRESCALE) {
        var s = 0.0;
        for (var i = 0u; i < K / 4u; i++) {
            let v = x[x_row * (K / 4u) + i];
            s += dot(v, v);
        }
        x_scale = inverseSqrt(s / f32(K) + EPS);
    }
    for (var g = 0u; g < groups; g++) {
        let xb = x_row * (K / 4u) + g * KV4 + xc;
        for (var j = 0u; j < XV; j++) {
            var v = x[xb + j];
            if (NORM && !PRESCALE) {
                sum_sq += dot(v, v);
            }
            if (NORM) {
                v *= norm_w[g * KV4 + xc + j] * x_scale;
            }
            xs[xr * KV4 + xc + j] = tv(v);
        }
        stage_weights(lid, n0, g, outs_per_tile);
        workgroupBarrier();
        for (var kk = 0u; kk < KV4; kk++) {
            var b: array<tv, TN>;
            for (var j = 0u; j < TN; j++) {
                b[j] = ws[(tx + CN * j) * KV4 + kk];
            }
            for (var i = 0u; i < TM; i++) {
                let a = xs[(ty * TM + i) * KV4 + kk];
                for (var j = 0u; j < TN; j++) {
                    acc[i][j] += dot(vec4<f32>(a), vec4<f32>(b[j]));
                }
            }
        }
        workgroupBarrier();
    }
    // The loop ended with a barrier: xs is free.
    if (!PRESCALE) {
        put_sum(lid, sum_sq);
    }
    workgroupBarrier();
    for (var i = 0u; i < TM; i++) {
        let r = ty * TM + i;
        if (m0 + r < count) {
            var scale = 1.0;
            if (!PRESCALE) {
                scale = row_scale(r);
            }
            write_row(m0 + r, n0, tx, acc[i], scale);
        }
    }
}
