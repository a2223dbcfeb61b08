// The read ceiling for benchmarks: sum a large buffer with vec4 loads and nothing else;
// each invocation writes its sum to out[i], so no load can be optimised away. Two
// layouts of the T invocations in all over the N4 vec4s (the bench keeps the faster):
// - interleaved (CHUNKED false): invocation i sums i, i + T, i + 2T, … (neighbouring
//   invocations read neighbouring vec4s: coalesced on GPUs);
// - chunked: invocation i sums its own contiguous N4 / T vec4s, four independent sums
//   per iteration (one sequential stream per invocation: what CPU adapters prefetch
//   best). The host makes N4 a multiple of 4·T.

override N4: u32;   // vec4 elements in `data`
override WG: u32 = 64u;
override CHUNKED: bool = false;

@group(0) @binding(0) var<storage, read> data: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let total = nwg.x * WG;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    if (CHUNKED) {
        let chunk = N4 / total;
        let first = gid.x * chunk;
        for (var i = first; i < first + chunk; i += 4u) {
            a0 += data[i];
            a1 += data[i + 1u];
            a2 += data[i + 2u];
            a3 += data[i + 3u];
        }
    } else {
        for (var i = gid.x; i < N4; i += total) {
            a0 += data[i];
        }
    }
    out[gid.x] = dot(a0 + a1 + a2 + a3, vec4<f32>(1.0));
}
