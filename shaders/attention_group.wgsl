// Decode attention for one query token (GQA), the GPU design: one workgroup per (KV head,
// split) computes every q head of the KV head's group, so each key and value is loaded
// from memory once for the whole group. The per-head q/k RMSNorm (qwen3, optional), RoPE
// (neox: pairs (i, i + HD/2)) and this step's KV-cache write are fused in; the context is
// split (flash-decoding) when the history is long.
//
// Workgroup (kv, s) of the grid (N_KV, splits) takes the GROUP = N_HEADS / N_KV q heads of
// KV head kv and the positions [s·L, min((s+1)·L, pos+1)), L = split_len_at(pos + 1): the
// wrapper's, SPLIT_LEN or (W_o folded) longer where the splits would pass MAX_SPLITS.
// - Prologue: the group's q heads normed (a segment of lanes per head sums the squares)
//   and roped into q_sh. The split that holds `pos` (the last one) also norms and ropes
//   this step's k and packs k and v as f16 into row_sh: its scores and P·V read position
//   pos from there (the values the cache holds), never from the cache, so no workgroup
//   reads a cache row this dispatch writes. Block 0 (the only one unfolded) writes them
//   to the caches at pos.
// - Per chunk of up to CHUNK positions (one chunk for the GPU profile's 256-position
//   splits): (1) scores: an invocation per position dots its key, loaded as vec4s, with
//   all GROUP queries (workgroup memory, the same address across the workgroup) into
//   p_sh (group_scores); (2) softmax: a segment of SEG lanes per head reduces the chunk's
//   max, then turns scores into exp(s - m) and sums them; the running max m and sum l per
//   head carry across chunks (online softmax, `corr` rescales what came before); (3) P·V:
//   invocation (r, d) owns vec4 d of every head's accumulator over positions r,
//   r + RANGES, …, each value loaded once for the group, four positions' loads in flight
//   at a time.
// - A lane's per-head scores and accumulators are registers named per head (`Acc`, the
//   group_* functions: the wrapper writes them out for the shape's GROUP). Arrays indexed
//   by head in loops (the design before) were kept in memory on an H200: a score over one
//   key cost 8 µs per layer.
// - After the last chunk the RANGES partial accumulators are summed by halving rounds
//   through workgroup memory (p_sh reused) and the first range writes the output.
//
// One split (pos < SPLIT_LEN): out[h] = softmax(q·K/sqrt(HD))·V, normalised. Several: out
// holds per (q head, split) the unnormalised Σ p·v (HD values), then the split's max
// score m and Σ p, the layout of attention.wgsl's partials.
//
// WO_FOLD (the output projection folded in, attention_group_wo.wgsl): the grid of one
// split is (N_KV, 1, blocks); workgroup (kv, 0, b) computes the group's attention as
// above, then W_o row block b of the group's part from the normalised outputs (into q_sh,
// whose queries are no longer needed); only block 0 writes `out` and this step's k and v
// (the other blocks compute with the same values from row_sh). Several splits project
// nothing: attention_group_combine.wgsl merges them and projects, per (kv, b) too
// (unfolded, attention_group_merge.wgsl merges them).
//
// GROUP, GROUP_P2 (the next power of two), HD4 (HD / 4), WIDTH (invocations, 64 to 256)
// and CHUNK (2 · WIDTH: p_sh then holds the halving rounds' accumulators) are consts from
// the wrapper (attention_group.rs), chosen per shape so that workgroup memory stays within
// 16 KiB.
// qkv: [q (N_HEADS·HD) | k (N_KV·HD) | v (N_KV·HD)] f32, the QKV GEMV's output. Caches:
// [N_KV][CTX][HD/2] f16 pairs, read and written as vec2<u32> (4 values; f16x4, pack4:
// kv_vec4.wgsl). rope4, qkv4: rope_vec4.wgsl; sin_cos: rope_common.wgsl; the rope inputs'
// bindings 2-4 and accessors: the wrapper's (rope_inputs_wgsl).

override SPLIT_LEN: u32;

// `Step` and binding 0 (`step`) come from step.wgsl; the head shape's overrides and qkv
// (binding 1) from rope_common.wgsl.
@group(0) @binding(5) var<storage, read_write> k_cache: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

// P·V: position ranges (RANGES · HD4 ≤ WIDTH invocations own an accumulator vec4 each).
const RANGES: u32 = WIDTH / HD4;
// Softmax: lanes per head, a power of two (the group padded to GROUP_P2 heads: segments
// of whole halving rounds that never straddle a SIMD group of their size); the norm:
// lanes per head of the group's q heads and k.
const SEG: u32 = WIDTH / GROUP_P2;
const SEG_NORM: u32 = WIDTH / (GROUP + 1u);
const NEG_BIG: f32 = -3.4e38;

// The group's q heads, normed and roped: head g's vec4 d at g · HD4 + d.
var<workgroup> q_sh: array<vec4<f32>, GROUP * HD4>;
// The chunk's scores, then exp(s - m), of head g at g · CHUNK + t; after the last chunk
// the accumulators the halving rounds pass on.
var<workgroup> p_sh: array<f32, GROUP * CHUNK>;
// Segmented reductions (norm, max, sum).
var<workgroup> red: array<f32, WIDTH>;
// Per head: (running max, running sum) and the chunk's rescale of what came before.
var<workgroup> stats: array<vec2<f32>, GROUP>;
var<workgroup> corr_sh: array<f32, GROUP>;
// This step's k (vec4 d at d) and v (at HD4 + d), f16-packed as the caches hold them: the
// split holding pos reads position pos from here.
var<workgroup> row_sh: array<vec2<u32>, 2u * HD4>;

// Reduce red[] within segments of `seg` consecutive lanes (the first `used` lanes) into
// each segment's first entry: the sum, or the max when `take_max`. Call in uniform
// control flow, after a barrier that follows the writes; ends with a barrier.
fn segment_reduce(lid: u32, seg: u32, used: u32, take_max: bool) {
    let j = lid % seg;
    var width = 1u;
    while (width < seg) {
        width <<= 1u;
    }
    for (var s = width >> 1u; s > 0u; s >>= 1u) {
        if (lid < used && j < s && j + s < seg) {
            let other = red[lid + s];
            red[lid] = select(red[lid] + other, max(red[lid], other), take_max);
        }
        workgroupBarrier();
    }
}

// Cache word `at` of k (`is_k`) or v, or where it is this step's row (`now`), row_sh[i]:
// a branch, not a select, so no workgroup reads the row at pos that block 0 writes.
fn cache_or_row(is_k: bool, at: u32, i: u32, now: bool) -> vec2<u32> {
    if (now) {
        return row_sh[i];
    }
    if (is_k) {
        return k_cache[at];
    }
    return v_cache[at];
}

// Vec4 d of the value at position j (`cbase`: the KV head's first word), from the cache or
// this step's row.
fn value_at(cbase: u32, j: u32, d: u32, pos: u32) -> vec4<f32> {
    return f16x4(cache_or_row(false, cbase + j * HD4 + d, HD4 + d, j == pos));
}

// The RMSNorm factor of head `hh` of the prologue's norm segments (q heads 0..GROUP,
// then k at GROUP); 1 without QK_NORM.
fn norm_factor(hh: u32) -> f32 {
    if (!QK_NORM) {
        return 1.0;
    }
    return 1.0 / sqrt(red[hh * SEG_NORM] / f32(HD) + EPS);
}

@compute @workgroup_size(WIDTH)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let kv = wid.x;
    let split = wid.y;
    let splits = nwg.y;
    let pos = step.pos;
    let len = pos + 1u;
    let split_len = split_len_at(len);
    let start = split * split_len;
    if (start >= len) {
        return; // a split past the history (the host sizes the grid, so only in tests)
    }
    let end = min(start + split_len, len);
    let h0 = kv * GROUP;
    let k_src = (N_HEADS + kv) * HD;
    let v_src = (N_HEADS + N_KV + kv) * HD;

    // Prologue: norm factors (segments of SEG_NORM lanes: q heads, then k), q roped into
    // q_sh; the split holding pos packs this step's k and v into row_sh, block 0 also
    // into the caches.
    if (QK_NORM) {
        let hh = lid / SEG_NORM;
        var ss = 0.0;
        if (lid < (GROUP + 1u) * SEG_NORM) {
            let src = select((h0 + hh) * HD, k_src, hh == GROUP);
            for (var e = lid % SEG_NORM; e < HD; e += SEG_NORM) {
                let x = qkv[src + e];
                ss += x * x;
            }
        }
        red[lid] = ss;
        workgroupBarrier();
        segment_reduce(lid, SEG_NORM, (GROUP + 1u) * SEG_NORM, false);
    }
    for (var i = lid; i < GROUP * HD4; i += WIDTH) {
        let g = i / HD4;
        q_sh[i] = rope4((h0 + g) * HD, i % HD4, norm_factor(g), true);
    }
    // Key j's vec4 d is at (kv · CTX + j) · HD4 + d.
    let cbase = kv * CTX * HD4;
    let block = wid.z;
    if (end == len) {
        let at = cbase + pos * HD4;
        let inv_k = norm_factor(GROUP);
        for (var d = lid; d < HD4; d += WIDTH) {
            let k = pack4(rope4(k_src, d, inv_k, false));
            let v = pack4(qkv4(v_src, d));
            row_sh[d] = k;
            row_sh[HD4 + d] = v;
            if (block == 0u) {
                k_cache[at + d] = k;
                v_cache[at + d] = v;
            }
        }
    }
    if (lid < GROUP) {
        stats[lid] = vec2<f32>(NEG_BIG, 0.0);
    }
    workgroupBarrier();

    let scale = 1.0 / sqrt(f32(HD));
    // Softmax lanes: head sg, lane sj of its segment.
    let sg = lid / SEG;
    let sj = lid % SEG;
    let in_seg = lid < GROUP * SEG;
    // P·V lanes: range r, vec4 d.
    let r = lid / HD4;
    let d = lid % HD4;
    let in_pv = r < RANGES;
    var acc: Acc;
    for (var c0 = start; c0 < end; c0 += CHUNK) {
        let n = min(CHUNK, end - c0);
        // (1) Scores.
        for (var t = lid; t < n; t += WIDTH) {
            group_scores(cbase + (c0 + t) * HD4, c0 + t == pos, t, scale);
        }
        workgroupBarrier();
        // (2) Softmax: the chunk's max per head, then exp and the sum.
        var x = NEG_BIG;
        if (in_seg) {
            for (var t = sj; t < n; t += SEG) {
                x = max(x, p_sh[sg * CHUNK + t]);
            }
        }
        red[lid] = x;
        workgroupBarrier();
        segment_reduce(lid, SEG, GROUP * SEG, true);
        var m_old = 0.0;
        var m_new = 0.0;
        if (in_seg) {
            m_old = stats[sg].x;
            m_new = max(m_old, red[sg * SEG]);
        }
        workgroupBarrier();
        var sum = 0.0;
        if (in_seg) {
            for (var t = sj; t < n; t += SEG) {
                let at = sg * CHUNK + t;
                let p = exp(p_sh[at] - m_new);
                p_sh[at] = p;
                sum += p;
            }
        }
        red[lid] = sum;
        workgroupBarrier();
        segment_reduce(lid, SEG, GROUP * SEG, false);
        if (in_seg && sj == 0u) {
            let corr = exp(m_old - m_new);
            corr_sh[sg] = corr;
            stats[sg] = vec2<f32>(m_new, stats[sg].y * corr + red[sg * SEG]);
        }
        workgroupBarrier();
        // (3) P·V over this lane's positions of the chunk, four at a time: their loads
        // are issued together, not one cache round trip per position.
        if (in_pv) {
            group_rescale(&acc);
            var t = r;
            for (; t + 3u * RANGES < n; t += 4u * RANGES) {
                let v0 = value_at(cbase, c0 + t, d, pos);
                let v1 = value_at(cbase, c0 + t + RANGES, d, pos);
                let v2 = value_at(cbase, c0 + t + 2u * RANGES, d, pos);
                let v3 = value_at(cbase, c0 + t + 3u * RANGES, d, pos);
                group_add4(&acc, t, v0, v1, v2, v3);
            }
            for (; t < n; t += RANGES) {
                group_add1(&acc, t, value_at(cbase, c0 + t, d, pos));
            }
        }
        workgroupBarrier();
    }

    // Sum the ranges' accumulators: each round, ranges [half, count) pass theirs on to
    // [0, count - half) through p_sh (vec4 (range · HD4 + d) · GROUP + g, as 4 floats).
    for (var count = RANGES; count > 1u; count = (count + 1u) / 2u) {
        let half = (count + 1u) / 2u;
        if (in_pv && r >= half && r < count) {
            group_store(&acc, 4u * ((r - half) * HD4 + d) * GROUP);
        }
        workgroupBarrier();
        if (in_pv && r < count - half) {
            group_load_add(&acc, 4u * (r * HD4 + d) * GROUP);
        }
        workgroupBarrier();
    }
    if (lid < HD4) {
        for (var g = 0u; g < GROUP; g++) {
            let h = h0 + g;
            let st = stats[g];
            let a = group_head(&acc, g);
            var o = a / st.y;
            var at = h * HD + 4u * d;
            if (splits > 1u) {
                o = a;
                let base = (h * splits + split) * (HD + 2u);
                at = base + 4u * d;
                if (d == 0u) {
                    out[base + HD] = st.x;
                    out[base + HD + 1u] = st.y;
                }
            } else if (WO_FOLD) {
                q_sh[g * HD4 + d] = o;
            }
            if (block == 0u) {
                out[at] = o.x;
                out[at + 1u] = o.y;
                out[at + 2u] = o.z;
                out[at + 3u] = o.w;
            }
        }
    }
    if (WO_FOLD && splits == 1u) {
        workgroupBarrier();
        project_block(kv, block, lid);
    }
}
