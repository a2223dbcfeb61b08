// The texture read ceiling for benchmarks: sum an rgba32uint texture (as the GEMV's code
// textures are laid out, gpu::code_texture, and bound on lavapipe: a read-only storage
// texture, q4_codes::TextureOrder::Tiles) with textureLoad and nothing else. Each
// workgroup sums ROWS texture rows; neighbouring invocations read neighbouring texels.
// Each invocation writes its sum to out[i], so no load can be optimised away.

override WG: u32 = 64u;
override ROWS: u32;

@group(0) @binding(0) var data: texture_storage_2d<rgba32uint, read>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let width = textureDimensions(data).x;
    var a = vec4<u32>(0u);
    for (var y = wid.x * ROWS; y < (wid.x + 1u) * ROWS; y++) {
        for (var x = lid; x < width; x += WG) {
            a += textureLoad(data, vec2<u32>(x, y));
        }
    }
    out[wid.x * WG + lid] = a.x ^ a.y ^ a.z ^ a.w;
}
