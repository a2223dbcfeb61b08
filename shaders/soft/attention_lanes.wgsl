// Decode attention for one query token (GQA) over the f16 KV cache, the CPU-adapter
// design (lavapipe, SwiftShader): no workgroup memory, no barriers, split along the
// context (flash-decoding), with the per-head q/k RMSNorm (qwen3, optional), RoPE (neox:
// pairs (i, i + HD/2)) and this step's KV write fused in.
//
// This file holds the bindings and helpers; the wrapper appends one of two mappings of
// the work to SIMD lanes (attention_lanes.rs):
// - attention_lanes_heads.wgsl, for a history of one split: a lane per q head, the GQA
//   group's heads side by side, each lane loading the keys itself;
// - attention_lanes_splits.wgsl, for several: a lane per (split, KV head) holding all
//   GROUP = N_HEADS / N_KV q heads of the KV head, so each key and value loaded (lane by
//   lane on CPU adapters: what costs most at long histories) serves GROUP heads. Split
//   `split` walks positions [split·SPLIT_LEN, min((split+1)·SPLIT_LEN, pos+1)) with an
//   online softmax.
// Every invocation norms and ropes its q heads from qkv itself (state_init: a few hundred
// operations per head, against up to SPLIT_LEN keys), and this step's k (normed, roped)
// and v go to the caches at its position.
//
// One split (pos < SPLIT_LEN): out = softmax(q·K/sqrt(HD))·V, normalised, per head.
// Several: partials per (head, split) hold the unnormalised Σ p·v (HD values), then the
// split's max score m and Σ p, and attention_combine.wgsl merges them. SPLIT_LEN stays far
// below mesa's loop limiter (65,535 loop iterations per invocation, then loops end
// silently).
//
// State, state_init, state_step, state_store and state_store_partial: the wrapper's
// generated code (lanes_state.rs); f16x4, pack4: kv_vec4.wgsl; softmax_step:
// attention_lanes_common.wgsl; sin_cos: rope_common.wgsl; rope_elem, rope4, qkv4:
// rope_vec4.wgsl. qkv: [q (N_HEADS·HD) | k (N_KV·HD) | v (N_KV·HD)] f32, the
// QKV GEMV's output; out: N_HEADS·HD f32. Caches: [N_KV][CTX][HD/2] f16 pairs, read and
// written as vec2<u32> (4 values). HD: a multiple of 4. Angles: f32(pos) · inv_freq[i]
// (inv_freq = θ^(-2i/HD), computed on the host).

override SPLIT_LEN: u32;

// `Step` and binding 0 (`step`) come from step.wgsl; the head shape's overrides and qkv
// (binding 1) from rope_common.wgsl.
// Bindings 2-4 (q_norm, k_norm, inv_freq) and their accessors NAME_at(i): the wrapper's
// (rope_inputs_wgsl).
@group(0) @binding(5) var<storage, read_write> k_cache: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> partials: array<f32>;

// The RMSNorm factor of the head at `src` in qkv (1 without QK_NORM).
fn norm_factor(src: u32) -> f32 {
    if (!QK_NORM) {
        return 1.0;
    }
    var ss = 0.0;
    for (var i = 0u; i < HD; i++) {
        let v = qkv[src + i];
        ss += v * v;
    }
    return 1.0 / sqrt(ss / f32(HD) + EPS);
}

// The q heads of workgroup y of the heads mappings (attention_lanes_heads.wgsl,
// attention_lanes_combine.wgsl): KV head `kv`'s group heads first..first + count, 8 to a
// workgroup (groups over 8 heads take several workgroups along y, the last maybe fewer);
// lane l holds q head h0 + l.
struct HeadChunk {
    kv: u32,
    first: u32,
    count: u32,
    h0: u32,
}

fn head_chunk(y: u32) -> HeadChunk {
    let group = N_HEADS / N_KV;
    let chunks = (group + 7u) / 8u;
    let kv = y / chunks;
    let first = (y % chunks) * 8u;
    return HeadChunk(kv, first, min(8u, group - first), kv * group + first);
}

// This step's k (normed, roped) and v of KV head kv, as f16, to the caches at vec2 `at`
// (the splits mapping: written, then read back like any other key).
fn write_kv(kv: u32, at: u32) {
    let k_src = (N_HEADS + kv) * HD;
    let v_src = (N_HEADS + N_KV + kv) * HD;
    let inv = norm_factor(k_src);
    for (var d = 0u; d < HD / 4u; d++) {
        k_cache[at + d] = pack4(rope4(k_src, d, inv, false));
        v_cache[at + d] = pack4(qkv4(v_src, d));
    }
}
