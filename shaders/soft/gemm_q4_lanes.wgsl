// Q4 g64 GEMM, the CPU-adapter design (lavapipe, SwiftShader): no workgroup memory, no
// barriers. CPU adapters run 8 invocations as one SIMD vector; a load whose index is not
// a compile-time constant is done lane by lane (~3 cycles per lane and scalar on
// lavapipe), for storage and uniform buffers alike. So every loaded value must feed as
// many multiply-adds as registers allow:
// - each invocation owns ROWS = 8 matrix rows (8 output rows, or 4 gate + 4 up rows for
//   SwiGLU), so each x value loaded serves 8 rows;
// - each code texel (32 weights) loaded serves the tile's 8 token rows.
// (Measured on lavapipe, Pocket's shapes: 1 row × 16 tokens ~2 GMAC/s, 8 × 8 ~5.)
// x comes as two uniform bindings of 4 token rows each (so K up to 4096 fits the 64 KiB
// uniform limit); the sums of tokens 0..3 and 4..7 of slot s are acc[2s] and acc[2s + 1].
// One dispatch per tile of TOKENS = 8 token rows; `tile` holds the tile's first row and,
// with NORM, the rows' RMSNorm factors (written by gemm_q4_rms.wgsl before).
//
// The header (gemm_q4_lanes.rs) declares TOKENS, the codes (binding 2: storage or
// texture) with their accessor code4(i) (texel i: 32 codes), x0 and x1 (bindings 4, 5:
// 4 token rows of K each, uniform array<vec4<f32>>, row-major) and norm_w (binding 6: K
// values, uniform). `Chunk` (binding 0) comes from chunk.wgsl; constants, lo4/hi4 from
// q4_common.wgsl, finish from gemm_q4_common.wgsl. The wrapper appends the x loads,
// `load_x(kv, lane)`: gemm_q4_lanes_x.wgsl (every invocation loads them all), or
// gemm_q4_lanes_x_subgroup.wgsl (through an 8-wide subgroup, which also declares `sid`,
// the subgroup invocation id, at `//#subgroup_lane`; `//#lane` becomes `let lane`).

override WG: u32 = 8u;
const ROWS: u32 = 8u;

struct Tile {
    start: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    // RMSNorm factor of token row start + 4·i + j in scale[i][j].
    scale: array<vec4<f32>, 2>,
}

@group(0) @binding(1) var<uniform> tile: Tile;
@group(0) @binding(3) var<storage, read> qparams: array<u32>;
@group(0) @binding(7) var<storage, read> bias: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;

// x values 8 apart in k (vec4s kv and kv + 1) of four token rows.
struct X8 {
    lo: array<vec4<f32>, 4>,
    hi: array<vec4<f32>, 4>,
}

// The norm weights for vec4 kv (ones without NORM).
fn nw(kv: u32) -> vec4<f32> {
    if (NORM) {
        return norm_w[kv];
    }
    return vec4<f32>(1.0);
}

// The 8 weights of code word w (p = (scale, min)): values 0..3 and 4..7.
fn dequant(w: u32, p: vec2<f32>) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(lo4(w) * p.x + p.y, hi4(w) * p.x + p.y);
}

// acc + the sums of 8 weights w with the four token rows of q.
fn quad(acc: vec4<f32>, w: array<vec4<f32>, 2>, q: X8) -> vec4<f32> {
    return acc + vec4<f32>(
        dot(w[0], q.lo[0]) + dot(w[1], q.hi[0]),
        dot(w[0], q.lo[1]) + dot(w[1], q.hi[1]),
        dot(w[0], q.lo[2]) + dot(w[1], q.hi[2]),
        dot(w[0], q.lo[3]) + dot(w[1], q.hi[3]));
}

// The matrix row of slot s (< ROWS) of the invocation whose first output row is `first`:
// output rows first .. first + ROWS / parts() - 1, gate and up rows interleaved for
// SwiGLU. Rows past N repeat row N - 1 (all lanes run the loops); never written.
fn slot_row(first: u32, s: u32) -> u32 {
    let o = min(first + s / parts(), N - 1u);
    return o + (s % parts()) * N;
}

// (scale, min) of group g of slot s.
fn qp(first: u32, s: u32, g: u32) -> vec2<f32> {
    return unpack2x16float(qparams[slot_row(first, s) * (K / 64u) + g]);
}

// Texel h (32 codes) of group g of slot s.
fn texel(first: u32, s: u32, g: u32, h: u32) -> vec4<u32> {
    return code4(slot_row(first, s) * (K / 32u) + 2u * g + h);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32
//#subgroup_lane
        ) {
//#lane
    let outs = ROWS / parts();
    let first = (wid.x * WG + lid) * outs;
    // Sums of slot s: tokens 0..3 in as, 4..7 in bs. Plain vec4 variables, not an
    // array, so that they stay in registers (a private array lives in memory, and its
    // loads and stores go lane by lane).
    var a0 = vec4<f32>(0.0); var a1 = a0; var a2 = a0; var a3 = a0;
    var a4 = a0; var a5 = a0; var a6 = a0; var a7 = a0;
    var b0 = a0; var b1 = a0; var b2 = a0; var b3 = a0;
    var b4 = a0; var b5 = a0; var b6 = a0; var b7 = a0;
    for (var g = 0u; g < K / 64u; g++) {
        let p0 = qp(first, 0u, g); let p1 = qp(first, 1u, g);
        let p2 = qp(first, 2u, g); let p3 = qp(first, 3u, g);
        let p4 = qp(first, 4u, g); let p5 = qp(first, 5u, g);
        let p6 = qp(first, 6u, g); let p7 = qp(first, 7u, g);
        for (var h = 0u; h < 2u; h++) {
            let c0 = texel(first, 0u, g, h); let c1 = texel(first, 1u, g, h);
            let c2 = texel(first, 2u, g, h); let c3 = texel(first, 3u, g, h);
            let c4 = texel(first, 4u, g, h); let c5 = texel(first, 5u, g, h);
            let c6 = texel(first, 6u, g, h); let c7 = texel(first, 7u, g, h);
            for (var j = 0u; j < 4u; j++) {
                // Word j: values 8·j .. 8·j + 7 of the half, x vec4s kv and kv + 1.
                let kv = 16u * g + 8u * h + 2u * j;
                let q = load_x(kv, lane);
                let q0 = q[0];
                let q1 = q[1];
                let w0 = dequant(c0[j], p0); a0 = quad(a0, w0, q0); b0 = quad(b0, w0, q1);
                let w1 = dequant(c1[j], p1); a1 = quad(a1, w1, q0); b1 = quad(b1, w1, q1);
                let w2 = dequant(c2[j], p2); a2 = quad(a2, w2, q0); b2 = quad(b2, w2, q1);
                let w3 = dequant(c3[j], p3); a3 = quad(a3, w3, q0); b3 = quad(b3, w3, q1);
                let w4 = dequant(c4[j], p4); a4 = quad(a4, w4, q0); b4 = quad(b4, w4, q1);
                let w5 = dequant(c5[j], p5); a5 = quad(a5, w5, q0); b5 = quad(b5, w5, q1);
                let w6 = dequant(c6[j], p6); a6 = quad(a6, w6, q0); b6 = quad(b6, w6, q1);
                let w7 = dequant(c7[j], p7); a7 = quad(a7, w7, q0); b7 = quad(b7, w7, q1);
            }
        }
    }
    // The sums of slot s, tokens 4·i .. 4·i + 3, in acc[2s + i]: an array from here on,
    // for the epilogue's loops.
    let acc = array<vec4<f32>, 16>(a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7);
    for (var i = 0u; i < outs; i++) {
        let o = first + i;
        if (o >= N) {
            break;
        }
        let gate = parts() * i;
        let up = gate + parts() - 1u;
        for (var t = 0u; t < TOKENS; t++) {
            let m = tile.start + t;
            if (m >= chunk.count) {
                break;
            }
            var scale = 1.0;
            if (NORM) {
                scale = tile.scale[t / 4u][t % 4u];
            }
            let q = t / 4u;
            finish(m, o, scale * acc[2u * gate + q][t % 4u], scale * acc[2u * up + q][t % 4u]);
        }
    }
}
