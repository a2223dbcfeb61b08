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
@group(0) @binding(2) var<storage, read> codes: array<vec4<u32>>;
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

// The TOKENS sums of one matrix row, in a[0..TOKENS / 4].
struct Sums {
    a0: vec4<f32>,
    a1: vec4<f32>,
    a2: vec4<f32>,
    a3: vec4<f32>,
}

// Add code word w (8 weights, values kv·4 .. kv·4 + 7; p = (scale, min)) into the sums.
fn word(s: ptr<function, Sums>, w: u32, p: vec2<f32>, kv: u32) {
    var wl = lo4(w) * p.x + p.y;
    var wh = hi4(w) * p.x + p.y;
    if (NORM) {
        wl *= norm_w[kv];
        wh *= norm_w[kv + 1u];
    }
    (*s).a0 = quad((*s).a0, wl, wh, 0u, kv);
    if (TOKENS > 4u) {
        (*s).a1 = quad((*s).a1, wl, wh, 4u, kv);
    }
    if (TOKENS > 8u) {
        (*s).a2 = quad((*s).a2, wl, wh, 8u, kv);
        (*s).a3 = quad((*s).a3, wl, wh, 12u, kv);
    }
}

// Add quant group g of matrix row r into the sums.
fn group(s: ptr<function, Sums>, r: u32, g: u32) {
    let p = unpack2x16float(qparams[r * (K / 64u) + g]);
    let c0 = codes[r * (K / 32u) + 2u * g];
    let c1 = codes[r * (K / 32u) + 2u * g + 1u];
    let kv = 16u * g;
    word(s, c0.x, p, kv);
    word(s, c0.y, p, kv + 2u);
    word(s, c0.z, p, kv + 4u);
    word(s, c0.w, p, kv + 6u);
    word(s, c1.x, p, kv + 8u);
    word(s, c1.y, p, kv + 10u);
    word(s, c1.z, p, kv + 12u);
    word(s, c1.w, p, kv + 14u);
}

// Sum t (< TOKENS) of s.
fn pick(s: Sums, t: u32) -> f32 {
    var q = s.a0;
    if (t >= 12u) {
        q = s.a3;
    } else if (t >= 8u) {
        q = s.a2;
    } else if (t >= 4u) {
        q = s.a1;
    }
    return q[t % 4u];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let o_raw = wid.x * WG + lid;
    // Rows past N repeat row N - 1 (all lanes run the loop); they are never written.
    let o = min(o_raw, N - 1u);
    let zero = vec4<f32>(0.0);
    var gate = Sums(zero, zero, zero, zero);
    var up = Sums(zero, zero, zero, zero);
    for (var g = 0u; g < K / 64u; g++) {
        group(&gate, o, g);
        if (EPILOGUE == 2u) {
            group(&up, o + N, g);
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
        finish(m, o, scale * pick(gate, t), scale * pick(up, t));
    }
}
