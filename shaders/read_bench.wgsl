// The read ceiling for benchmarks: sum a large buffer with vec4 loads and nothing else.
// Invocation i of T in all sums elements i, i + T, i + 2T, … (neighbouring invocations read
// neighbouring vec4s) and writes its sum to out[i], so no load can be optimised away.

override N4: u32;   // vec4 elements in `data`
override WG: u32 = 64u;

@group(0) @binding(0) var<storage, read> data: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let total = nwg.x * WG;
    var acc = vec4<f32>(0.0);
    for (var i = gid.x; i < N4; i += total) {
        acc += data[i];
    }
    out[gid.x] = dot(acc, vec4<f32>(1.0));
}
