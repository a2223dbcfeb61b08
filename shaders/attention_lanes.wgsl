// Decode attention for one query token (GQA) over the f16 KV cache, the CPU-adapter
// design (lavapipe, SwiftShader): no workgroup memory, no barriers, split along the
// context (flash-decoding). q/k-norm, RoPE and the KV write run before it (rope_kv.wgsl),
// so the cache already holds this step's position.
//
// On CPU adapters every storage load is done lane by lane (~20 cycles per 4 bytes per
// invocation on lavapipe), so loads per multiply-add set the speed: one invocation per
// (split, KV head) computes all GROUP = N_HEADS / N_KV q heads that share the KV head, so
// each key and value loaded serves GROUP heads (the workgroup design, attention.wgsl,
// loads every key once per q head). Invocation `split` of KV head `kv` walks positions
// [split·SPLIT_LEN, min((split+1)·SPLIT_LEN, pos+1)) with an online softmax; 8 splits per
// workgroup (one SIMD batch), KV heads along y.
//
// One split (pos < SPLIT_LEN): out = softmax(q·K/sqrt(HD))·V, normalised, per head.
// Several: partials per (head, split) hold the unnormalised Σ p·v (HD values), then the
// split's max score m and Σ p, and attention_combine.wgsl merges them. SPLIT_LEN stays far
// below mesa's loop limiter (65,535 loop iterations per invocation, then loops end
// silently).
//
// State, state_init, state_step, state_store and state_store_partial: the wrapper's
// generated code (lanes_state.rs); f16x4, softmax_step: attention_lanes_common.wgsl.
// q: N_HEADS·HD roped f32 (rope_kv.wgsl's q_out); out: N_HEADS·HD f32.
// Caches: [N_KV][CTX][HD/2] f16 pairs, read as vec2<u32> (4 values). HD: a multiple of 4.

override N_HEADS: u32;
override N_KV: u32;
override HD: u32;
override CTX: u32;
override SPLIT_LEN: u32;

// `Step` and binding 0 (`step`) come from step.wgsl.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kv = wid.y;
    let hd4 = HD / 4u;
    let group = N_HEADS / N_KV;
    let len = step.pos + 1u;
    let splits = (len + SPLIT_LEN - 1u) / SPLIT_LEN;
    let split = wid.x * 8u + lid;
    if (split >= splits) {
        return;
    }
    // vec4 index of the group's first head in q and out.
    let row = kv * group * hd4;
    var st = state_init(row, 1.0 / sqrt(f32(HD)));
    // Key j's vec4 d (two u32 pairs) is at (kv · CTX + j) · hd4 + d.
    let cbase = kv * CTX * hd4;
    let end = min((split + 1u) * SPLIT_LEN, len);
    for (var j = split * SPLIT_LEN; j < end; j++) {
        st = state_step(st, cbase + j * hd4, true);
    }
    if (splits == 1u) {
        state_store(row, st);
    } else {
        state_store_partial(kv * group, split, splits, st);
    }
}
