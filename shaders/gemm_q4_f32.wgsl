// The GPU GEMM's staged tiles in f32 (gemm_q4.wgsl; prepended with the layout's constants).
// After the K loop, x's tile holds each loader's Σx² in its first component.

const PRESCALE: bool = false;

alias tv = vec4<f32>;

fn put_sum(i: u32, s: f32) {
    xs[i] = vec4<f32>(s, 0.0, 0.0, 0.0);
}

fn get_sum(i: u32) -> f32 {
    return xs[i].x;
}
