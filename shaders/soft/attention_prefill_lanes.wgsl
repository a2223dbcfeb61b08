// Causal attention for prefill (GQA) over the f16 KV cache, the CPU-adapter design
// (lavapipe, SwiftShader): no workgroup memory, no barriers. Same inputs and outputs as
// attention_prefill.wgsl: the chunk's queries (positions chunk.start + t) attend to cache
// positions 0..=their own.
//
// On CPU adapters every storage load is done lane by lane (~20 cycles per 4 bytes per
// invocation on lavapipe), so loads per multiply-add set the speed. Hence:
// - one invocation per (query, KV head) computes all GROUP = N_HEADS / N_KV q heads that
//   share the KV head, so each key and value loaded serves GROUP heads;
// - one 8-invocation workgroup (one SIMD batch) per (8 queries, KV head); every lane walks
//   the same keys 0..=last (the workgroup's last query position) in step, and keys past a
//   lane's own position weigh 0.
// Online softmax per key (running max, rescale, weighted value), one loop iteration per
// key: mesa's loop limiter ends all of a shader's loops, silently, after 65,535
// iterations in all, so up to ~65K keys are safe; prefill stops at 32,768.
//
// The per-lane state (GROUP heads' q and accumulators, HD values each, and their running
// max and sum) is `State`, a struct of vec4 members written out by the wrapper with its
// functions (lanes_state.rs): state_init, state_step, state_store. A private array would
// live in memory, its loads and stores going lane by lane; struct members stay in
// registers (or plain stack spills). f16x4: kv_vec4.wgsl; softmax_step:
// attention_lanes_common.wgsl.
//
// q: [count][N_HEADS·HD] f32; out: [count][N_HEADS·HD] f32. HD ≤ 256, a multiple of 4.

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override CTX: u32;

// `Chunk` and binding 0 (`chunk`) come from chunk.wgsl.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kv = wid.y;
    let hd4 = HD / 4u;
    let t0 = wid.x * 8u;
    let count = chunk.count;
    if (t0 >= count) {
        return;
    }
    let t = min(t0 + lid, count - 1u);
    let pos = chunk.start + t;
    let last = chunk.start + min(t0 + 7u, count - 1u);
    // vec4 index of the query's first head of the group in q and out.
    let row = (t * N_HEADS + kv * (N_HEADS / N_KV)) * hd4;
    var st = state_init(row, 1.0 / sqrt(f32(HD)));
    // Key j's vec4 d (two u32 pairs) is at (kv · CTX + j) · hd4 + d.
    let cbase = kv * CTX * hd4;
    for (var j = 0u; j <= last; j++) {
        st = state_step(st, cbase + j * hd4, j <= pos);
    }
    if (t0 + lid < count) {
        state_store(row, st);
    }
}
