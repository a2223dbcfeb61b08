// The sampler's logit adjustments, in place before argmax and top-k: entry i of `list`
// (token, bias, repetition factor, penalty) rewrites its token's logit x to
// rep(x + bias) - penalty, rep(y) = y / factor for y > 0, else y · factor (llama.cpp's
// repetition penalty; OpenAI's frequency and presence penalties in `penalty`). The host
// uploads each token once and pads the list to whole workgroups with token NONE.

override N: u32;

const NONE: u32 = 0xFFFFFFFFu;

struct Adjust {
    token: u32,
    bias: f32,
    factor: f32,
    penalty: f32,
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;
@group(0) @binding(1) var<storage, read> list: array<Adjust>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let a = list[gid.x];
    if (a.token == NONE || a.token >= N) {
        return;
    }
    let y = logits[a.token] + a.bias;
    logits[a.token] = select(y * a.factor, y / a.factor, y > 0.0) - a.penalty;
}
