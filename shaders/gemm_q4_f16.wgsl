// The GPU GEMM's staged tiles in f16 (gemm_q4.wgsl, with `shader-f16`; opens the source,
// as `enable` must). Each loader finds its token row's RMSNorm factor itself before the K
// loop (PRESCALE), so no Σx² passes through the tiles: the accessors are never called.
enable f16;

const PRESCALE: bool = true;

alias tv = vec4<f16>;

fn put_sum(i: u32, s: f32) {}

fn get_sum(i: u32) -> f32 {
    return 0.0;
}
