// Q4 g64 GEMM, the CPU-adapter design (lavapipe, SwiftShader): no workgroup memory, no
// barriers. CPU adapters run 8 invocations as one SIMD vector, but load storage buffers
// lane by lane (slow), while a uniform-buffer load at a lane-uniform index is one broadcast.
// So each invocation owns one output row (its gate and up rows for SwiGLU), loads each code
// word of it once, dequantizes it and multiplies it into TOKENS token sums held in vec4
// registers; the TOKENS token rows of x come from a uniform binding (broadcast loads).
// One dispatch per tile of TOKENS token rows; `tile` holds the tile's first row and, with
// NORM, the rows' RMSNorm factors (written by gemm_q4_rms.wgsl before).
//
// The header (gemm_q4.rs) declares TOKENS (4, 8 or 16), x (binding 4: TOKENS rows of K as
// a uniform array<vec4<f32>>, row-major) and norm_w (binding 5: K values, uniform).
// `Chunk` (binding 0) comes from chunk.wgsl; constants, lo4/hi4, finish from
// gemm_q4_common.wgsl.

override WG: u32 = 8u;

struct Tile {
    start: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    // RMSNorm factor of token row start + 4·i + j in scale[i][j].
    scale: array<vec4<f32>, 4>,
}

@group(0) @binding(1) var<uniform> tile: Tile;
// The code words (8 per row and group), read one u32 per lane.
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> qparams: array<u32>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

// acc + the sums of 8 weights (wl: values kv·4 .. +3, wh: the next 4) with token rows
// t0 .. t0 + 3 of x.
fn quad(acc: vec4<f32>, wl: vec4<f32>, wh: vec4<f32>, t0: u32, kv: u32) -> vec4<f32> {
    let s = K / 4u;
    let b = t0 * s + kv;
    return acc + vec4<f32>(
        dot(wl, x[b]) + dot(wh, x[b + 1u]),
        dot(wl, x[b + s]) + dot(wh, x[b + s + 1u]),
        dot(wl, x[b + 2u * s]) + dot(wh, x[b + 2u * s + 1u]),
        dot(wl, x[b + 3u * s]) + dot(wh, x[b + 3u * s + 1u]));
}

// The 8 weights of code word w (values kv·4 .. kv·4 + 7; p = (scale, min)), times the
// norm weights when NORM: (first 4, last 4).
fn weights(w: u32, p: vec2<f32>, kv: u32) -> array<vec4<f32>, 2> {
    var wl = lo4(w) * p.x + p.y;
    var wh = hi4(w) * p.x + p.y;
    if (NORM) {
        wl *= norm_w[kv];
        wh *= norm_w[kv + 1u];
    }
    return array<vec4<f32>, 2>(wl, wh);
}

// Sum t (< TOKENS) of the sums a0..a3 (tokens 4·i .. 4·i + 3 in ai).
fn pick(a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>, t: u32) -> f32 {
    var q = a0;
    if (t >= 12u) {
        q = a3;
    } else if (t >= 8u) {
        q = a2;
    } else if (t >= 4u) {
        q = a1;
    }
    return q[t % 4u];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let o_raw = wid.x * WG + lid;
    // Rows past N repeat row N - 1 (all lanes run the loop); they are never written.
    let o = min(o_raw, N - 1u);
    // Sums of tokens 4·i .. 4·i + 3 in gi (gate or plain row) and ui (up row); plain
    // vec4 variables, not arrays or structs, so that they stay in registers.
    var g0 = vec4<f32>(0.0);
    var g1 = vec4<f32>(0.0);
    var g2 = vec4<f32>(0.0);
    var g3 = vec4<f32>(0.0);
    var u0 = vec4<f32>(0.0);
    var u1 = vec4<f32>(0.0);
    var u2 = vec4<f32>(0.0);
    var u3 = vec4<f32>(0.0);
    let up = o + N;
    for (var g = 0u; g < K / 64u; g++) {
        let pg = unpack2x16float(qparams[o * (K / 64u) + g]);
        var pu = pg;
        if (EPILOGUE == 2u) {
            pu = unpack2x16float(qparams[up * (K / 64u) + g]);
        }
        for (var j = 0u; j < 8u; j++) {
            // Word j of the group: values 8·j .. 8·j + 7, x vec4s kv and kv + 1.
            let kv = 16u * g + 2u * j;
            let wg = weights(codes[o * (K / 8u) + 8u * g + j], pg, kv);
            g0 = quad(g0, wg[0], wg[1], 0u, kv);
            if (TOKENS > 4u) {
                g1 = quad(g1, wg[0], wg[1], 4u, kv);
            }
            if (TOKENS > 8u) {
                g2 = quad(g2, wg[0], wg[1], 8u, kv);
                g3 = quad(g3, wg[0], wg[1], 12u, kv);
            }
            if (EPILOGUE == 2u) {
                let wu = weights(codes[up * (K / 8u) + 8u * g + j], pu, kv);
                u0 = quad(u0, wu[0], wu[1], 0u, kv);
                if (TOKENS > 4u) {
                    u1 = quad(u1, wu[0], wu[1], 4u, kv);
                }
                if (TOKENS > 8u) {
                    u2 = quad(u2, wu[0], wu[1], 8u, kv);
                    u3 = quad(u3, wu[0], wu[1], 12u, kv);
                }
            }
        }
    }
    if (o_raw >= N) {
        return;
    }
    for (var t = 0u; t < TOKENS; t++) {
        let m = tile.start + t;
        if (m >= chunk.count) {
            break;
        }
        var scale = 1.0;
        if (NORM) {
            scale = tile.scale[t / 4u][t % 4u];
        }
        finish(m, o, scale * pick(g0, g1, g2, g3, t), scale * pick(u0, u1, u2, u3, t));
    }
}
