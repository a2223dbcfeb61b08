// The K = 64 largest of N logits, sorted (larger value first, lower index on ties; NaN
// never enters), in two passes:
//   PASS 0: LANES invocations each keep a sorted top-K of the logits i ≡ lane (mod LANES)
//           in private memory and write it to `partial` (LANES · K entries);
//   PASS 1: one invocation merges the LANES sorted lists into `result` (K entries).
// Entries are (index, f32 bits); unused ones have index 0xFFFFFFFF. No workgroup memory
// and no barriers: most logits fail the first comparison with the current K-th best.

override N: u32;
override PASS: u32 = 0u;
const K: u32 = 64u;
const LANES: u32 = 256u;
const NONE: u32 = 0xFFFFFFFFu;

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> result: array<vec2<u32>>;

var<private> vals: array<f32, 64>;
var<private> idxs: array<u32, 64>;

// Does (v, i) beat (bv, bi)? Larger value wins; equal values go to the lower index.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return v > bv || (v == bv && i < bi);
}

// Insert (v, i) into the sorted list if it beats the last entry; false if it does not.
fn insert(v: f32, i: u32) -> bool {
    if (!beats(v, i, vals[K - 1u], idxs[K - 1u])) {
        return false;
    }
    var j = K - 1u;
    while (j > 0u && beats(v, i, vals[j - 1u], idxs[j - 1u])) {
        vals[j] = vals[j - 1u];
        idxs[j] = idxs[j - 1u];
        j--;
    }
    vals[j] = v;
    idxs[j] = i;
    return true;
}

fn store(dst_base: u32, to_partial: bool) {
    for (var j = 0u; j < K; j++) {
        let e = vec2<u32>(idxs[j], bitcast<u32>(vals[j]));
        if (to_partial) {
            partial[dst_base + j] = e;
        } else {
            result[j] = e;
        }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var j = 0u; j < K; j++) {
        vals[j] = -3.4e38;
        idxs[j] = NONE;
    }
    if (PASS == 0u) {
        let lane = gid.x;
        for (var i = lane; i < N; i += LANES) {
            insert(logits[i], i);
        }
        store(lane * K, true);
        return;
    }
    if (gid.x != 0u) {
        return;
    }
    for (var lane = 0u; lane < LANES; lane++) {
        // Each list is sorted: the first entry that does not get in ends it.
        for (var j = 0u; j < K; j++) {
            let e = partial[lane * K + j];
            if (e.x == NONE || !insert(bitcast<f32>(e.y), e.x)) {
                break;
            }
        }
    }
    store(0u, false);
}
