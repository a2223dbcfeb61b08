// Shared by the Q4 g64 GEMV variants (prepended after q4_common.wgsl): bindings, the
// fused RMSNorm prologue and the epilogue. W is [ROWS_TOTAL][K]: codes u32[.][K/8] read
// as vec4<u32> (32 values), qparams u32[.][K/64] = pack2x16float(scale, min);
// w = scale · code + min. The wrapper declares the codes (binding 0: a storage array of
// vec4<u32>, or an rgba32uint texture on CPU adapters) with their accessor `code4(i)`
// (vec4 i of the codes), and x (binding 2) and norm_w (binding 3), as uniform or storage
// arrays of vec4<f32>, and `x_in(i)` (vec4 i of the input: x, plus the partial vectors of
// gemv_q4_parts.wgsl when the spec adds some) with `store_residual`.
//
// NORM: the input is rmsnorm(x) ⊙ norm_w. The rms factor is one scalar, so it factors out
// of every dot product: Σ W·(x ⊙ norm_w · r) = r · Σ W·(x ⊙ norm_w); the kernel sums
// with x ⊙ norm_w and scales the sums by r = 1 / sqrt(mean(x²) + EPS) at the end.
//
// EPILOGUE 0: out[o] = W[o]·x (+ bias[o])
// EPILOGUE 1: out[o] += W[o]·x (+ bias[o])               (residual add, in place)
// EPILOGUE 2: out[o] = silu(W[o]·x) · (W[N + o]·x)        (fused gate/up + SwiGLU; W holds
//             the gate rows then the up rows; bias, if any, likewise)

@group(0) @binding(1) var<storage, read> qparams: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// The matrix row of part `part` (0 gate/plain, 1 up) of output row `o`.
fn matrix_row(o: u32, part: u32) -> u32 {
    return o + part * N;
}

// `v` = x_in(i) (4 values), times the norm weights when NORM.
fn normed(v: vec4<f32>, i: u32) -> vec4<f32> {
    if (NORM) {
        return v * norm_w[i];
    }
    return v;
}

// x_in(i) (4 values), times the norm weights when NORM.
fn xn(i: u32) -> vec4<f32> {
    return normed(x_in(i), i);
}

// The RMSNorm factor from Σx² (1 without NORM).
fn rms_scale(sum_sq: f32) -> f32 {
    if (NORM) {
        return inverseSqrt(sum_sq / f32(K) + EPS);
    }
    return 1.0;
}

// Σ code·x over the 32 values of one vec4 of code words; xs holds those 32 x values.
fn dot32(c: vec4<u32>, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,
         x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>) -> f32 {
    return dot(lo4(c.x), x0) + dot(hi4(c.x), x1) + dot(lo4(c.y), x2) + dot(hi4(c.y), x3)
         + dot(lo4(c.z), x4) + dot(hi4(c.z), x5) + dot(lo4(c.w), x6) + dot(hi4(c.w), x7);
}

// Write output row `o` from its matrix-row dot products (up is unused unless SwiGLU).
fn finish(o: u32, gate_in: f32, up_in: f32) {
    var g = gate_in;
    var u = up_in;
    if (HAS_BIAS) {
        g += bias[matrix_row(o, 0u)];
        if (EPILOGUE == 2u) {
            u += bias[matrix_row(o, 1u)];
        }
    }
    let i = ROW0 + o;
    if (EPILOGUE == 1u) {
        out[i] = out[i] + g;
    } else if (EPILOGUE == 2u) {
        out[i] = g / (1.0 + exp(-g)) * u;
    } else {
        out[i] = g;
    }
}

// The codes of one u32 word without shifting each nibble down: nibble b (element b) is
// masked in place, so it reads as code · 2^(8b) (high nibbles: after one shift by 4);
// the x values are pre-scaled by 2^(-8b) to match (X_SCALE; exact: powers of two).
// 2 + 8·(and, convert, fma) per 8 weights instead of unpacking every byte.
const LO_MASK = vec4<u32>(0xFu, 0xF00u, 0xF0000u, 0xF000000u);
const X_SCALE = vec4<f32>(1.0, 0.00390625, 0.0000152587890625, 0.000000059604644775390625);

fn in_place(w: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(w) & LO_MASK));
}

// dot32 with x pre-scaled by X_SCALE.
fn dot32_scaled(c: vec4<u32>, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,
                x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>) -> f32 {
    let h = c >> vec4<u32>(4u);
    return dot(in_place(c.x), x0) + dot(in_place(h.x), x1)
         + dot(in_place(c.y), x2) + dot(in_place(h.y), x3)
         + dot(in_place(c.z), x4) + dot(in_place(h.z), x5)
         + dot(in_place(c.w), x6) + dot(in_place(h.w), x7);
}
