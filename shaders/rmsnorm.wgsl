// RMSNorm of one vector: out = x / sqrt(mean(x²) + EPS) · weight. One 64-wide workgroup.

override K: u32;
override EPS: f32;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    var s = 0.0;
    for (var i = lid; i < K; i += RED_WIDTH) {
        s += x[i] * x[i];
    }
    let inv = 1.0 / sqrt(workgroup_sum(s, lid) / f32(K) + EPS);
    for (var i = lid; i < K; i += RED_WIDTH) {
        out[i] = x[i] * inv * weight[i];
    }
}
