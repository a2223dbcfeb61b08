// The per-step uniform (forward.rs `StepUniform`), shared by the kernels that read it:
// the token being decoded and its position. Prepended to their sources by the wrappers.

struct Step {
    token: u32,
    pos: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
