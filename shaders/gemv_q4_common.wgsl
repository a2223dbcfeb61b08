// Shared by the two Q4 g64 GEMV variants (prepended): bindings, code unpacking and the
// epilogue. W is [ROWS_TOTAL][K]: codes u32[.][K/8] read as vec4<u32> (32 values),
// qparams u32[.][K/64] = pack2x16float(scale, min); w = scale · code + min.
//
// EPILOGUE 0: out[o] = W[o]·x (+ bias[o])
// EPILOGUE 1: out[o] += W[o]·x (+ bias[o])               (residual add, in place)
// EPILOGUE 2: out[o] = silu(W[o]·x) · (W[N + o]·x)        (fused gate/up + SwiGLU; W holds
//             the gate rows then the up rows; bias, if any, likewise)

override N: u32;
override K: u32;
override EPILOGUE: u32 = 0u;
override HAS_BIAS: bool = false;

@group(0) @binding(0) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> qparams: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

// Matrix rows feeding one output row: 2 for SwiGLU (gate, up), else 1.
fn rows_per_output() -> u32 {
    return select(1u, 2u, EPILOGUE == 2u);
}

// The matrix row of part `part` (0 gate/plain, 1 up) of output row `o`.
fn matrix_row(o: u32, part: u32) -> u32 {
    return o + part * N;
}

fn lo4(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(w & 0x0F0F0F0Fu));
}

fn hi4(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((w >> 4u) & 0x0F0F0F0Fu));
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
    if (EPILOGUE == 1u) {
        out[o] = out[o] + g;
    } else if (EPILOGUE == 2u) {
        out[o] = g / (1.0 + exp(-g)) * u;
    } else {
        out[o] = g;
    }
}
