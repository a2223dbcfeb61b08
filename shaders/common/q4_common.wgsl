// Shared by the Q4 g64 GEMV and GEMM variants (prepended before their own common code):
// the per-pipeline constants of a `GemvSpec` (`GemvSpec::constants`); code unpacking
// (lo4, hi4) follows from q4_unpack.wgsl.

override N: u32;
override K: u32;
override EPILOGUE: u32 = 0u;
override HAS_BIAS: bool = false;
override NORM: bool = false;
override EPS: f32 = 1e-6;
// The matrix's first row when it is one part of a matrix split by rows (a Q8 LM head
// larger than a storage binding): outputs, and the fused argmax's indices and partials,
// start there.
override ROW0: u32 = 0u;

// Matrix rows feeding one output row: 2 for SwiGLU (gate, up), else 1.
fn parts() -> u32 {
    return select(1u, 2u, EPILOGUE == 2u);
}
