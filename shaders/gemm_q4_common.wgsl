// Shared by the two Q4 g64 GEMM variants (prepended): the constants, code unpacking and
// the epilogue. Each variant declares `bias` (storage, read) and `out` (storage,
// read_write); W, codes and qparams are laid out as gemv_q4_common.wgsl explains.

override N: u32;
override K: u32;
override EPILOGUE: u32 = 0u;
override HAS_BIAS: bool = false;
override NORM: bool = false;
override EPS: f32 = 1e-6;

// Matrix rows feeding one output row: 2 for SwiGLU (gate, up), else 1.
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
