// Shared by the Q4 g64 GEMV and GEMM variants (prepended before their own common code):
// the per-pipeline constants of a `GemvSpec` (`GemvSpec::constants`) and code unpacking.

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
