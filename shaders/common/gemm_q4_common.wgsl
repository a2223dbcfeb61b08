// Shared by the two Q4 g64 GEMM variants (prepended after q4_common.wgsl): the
// epilogue. Each variant declares `bias` (storage, read) and `out` (storage,
// read_write); W, codes and qparams are laid out as gemv_q4_common.wgsl explains.

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
