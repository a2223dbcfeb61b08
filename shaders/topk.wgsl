// The K = 64 best of N logits (larger value first, the lower index on ties; NaN never
// enters), by radix select in workgroups of 256 invocations, in two passes:
//   PASS 0: GROUPS workgroups, each over CHUNK consecutive logits, write their chunk's K
//           best to `partial` (GROUPS · K entries, unsorted, unused ones index NONE);
//   PASS 1: one workgroup selects the K best of those GROUPS · K candidates and sorts
//           them into `result` (K entries, best first, unused ones index NONE).
// Entries are (index, f32 bits). Both passes select the same way: each element has the
// 64-bit key (order-preserving u32 of its value, !index), unique, larger is better, and
// the K-th best key is found 8 bits at a time from the top: a 256-bin histogram of the
// next digit among the elements that match the digits found so far (workgroup atomics),
// a suffix sum over the bins (Hillis–Steele, one barrier per step), and the bin that
// holds the K-th best. It stops as soon as that bin holds exactly the elements still
// wanted (after 2–4 value digits on distinct values; index digits only for ties at the
// K-th place), and the selected elements are those whose key digits so far are at least
// the ones found. PASS 1 sorts its K by rank (each counts the candidates it loses to).
// Per invocation the loops are short: (4 + IDX_DIGITS + 1) · ⌈elements / 256⌉ loads,
// 8 scan steps per digit, 16 comparisons (lavapipe stops an invocation's loops after
// 65,535 iterations in all). No subgroups, no f16; 3.8 KiB of workgroup memory.
// `mask` (constrained decoding): word 0 nonzero means PASS 0 sees only the logits whose
// bit is set in words 1.. (bit i % 32 of word 1 + i / 32), the others as unused entries;
// word 0 zero means it sees all.

override N: u32;
override PASS: u32 = 0u;
// Workgroups of pass 0 and the logits each reads (the last one may read fewer).
override GROUPS: u32 = 1u;
override CHUNK: u32 = 1u;
// 8-bit digits of the largest index (N - 1), at least 1.
override IDX_DIGITS: u32 = 1u;

const K: u32 = 64u;
const WG: u32 = 256u;
const NONE: u32 = 0xFFFFFFFFu;

@group(0) @binding(0) var<storage, read> logits: array<u32>;
@group(0) @binding(1) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> result: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> mask: array<u32>;

var<workgroup> hist: array<atomic<u32>, 256>;
// Ping-pong buffers of the suffix sum.
var<workgroup> sums: array<u32, 512>;
// The digits found so far of the K-th best key: its bits, which bits are found (hi:
// value key, lo: !index), how many elements matching them are still wanted, and whether
// all of those are (the selection is then fixed).
var<workgroup> found_hi: u32;
var<workgroup> found_lo: u32;
var<workgroup> mask_hi: u32;
var<workgroup> mask_lo: u32;
var<workgroup> want: u32;
var<workgroup> done: u32;
var<workgroup> count: atomic<u32>;
var<workgroup> chosen: array<vec2<u32>, 64>;
var<workgroup> rank: array<atomic<u32>, 64>;

// Order-preserving key of an entry's value (larger value, larger key; -0 as +0); 0 for
// NaN and unused entries (the smallest non-NaN key, -inf's, is 0x007FFFFF).
fn value_key(e: vec2<u32>) -> u32 {
    var b = e.y;
    if (e.x == NONE || (b & 0x7FFFFFFFu) > 0x7F800000u) {
        return 0u;
    }
    if (b == 0x80000000u) {
        b = 0u;
    }
    return select(b | 0x80000000u, ~b, (b >> 31u) != 0u);
}

// Does entry a beat entry b? Larger value wins; equal values go to the lower index.
fn beats(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ka = value_key(a);
    let kb = value_key(b);
    return ka > kb || (ka == kb && a.x < b.x);
}

// Element j of this workgroup's set: pass 0 its chunk's logit j, pass 1 candidate j.
fn element(base: u32, j: u32) -> vec2<u32> {
    if (PASS == 0u) {
        let i = base + j;
        if (mask[0] != 0u && ((mask[1u + i / 32u] >> (i % 32u)) & 1u) == 0u) {
            return vec2<u32>(NONE, 0u);
        }
        return vec2<u32>(i, logits[i]);
    }
    return partial[j];
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = lid.x;
    var base = 0u;
    var items = GROUPS * K;
    if (PASS == 0u) {
        base = wid.x * CHUNK;
        items = min(CHUNK, N - min(base, N));
    }
    atomicStore(&hist[t], 0u);
    if (t < K) {
        atomicStore(&rank[t], 0u);
    }
    if (t == 0u) {
        found_hi = 0u;
        found_lo = 0u;
        mask_hi = 0u;
        mask_lo = 0u;
        want = K;
        done = 0u;
        atomicStore(&count, 0u);
    }
    for (var d = 0u; d < 4u + IDX_DIGITS; d++) {
        // The barrier: last digit's state visible, the histogram cleared.
        if (workgroupUniformLoad(&done) != 0u) {
            break;
        }
        let f_hi = found_hi;
        let f_lo = found_lo;
        let m_hi = mask_hi;
        let m_lo = mask_lo;
        let wanted = want;
        // This digit: in the value key (d < 4) or in !index, most significant first.
        var shift = 24u - 8u * min(d, 3u);
        if (d >= 4u) {
            shift = 8u * (IDX_DIGITS - 1u - (d - 4u));
        }
        for (var j = t; j < items; j += WG) {
            let e = element(base, j);
            let hi = value_key(e);
            let lo = ~e.x;
            if (hi != 0u && (hi & m_hi) == f_hi && (lo & m_lo) == f_lo) {
                let digit = (select(lo, hi, d < 4u) >> shift) & 0xFFu;
                atomicAdd(&hist[digit], 1u);
            }
        }
        workgroupBarrier();
        // s: elements in bins t..255 (matching the digits found so far).
        let h = atomicLoad(&hist[t]);
        var s = h;
        for (var step = 0u; step < 8u; step++) {
            let off = 1u << step;
            let buf = (step & 1u) * WG;
            sums[buf + t] = s;
            workgroupBarrier();
            if (t + off < WG) {
                s += sums[buf + t + off];
            }
        }
        let above = s - h;
        if (h != 0u && above < wanted && wanted <= s) {
            // Bin t holds the K-th best: fix its digit.
            let rest = wanted - above;
            if (d < 4u) {
                found_hi = f_hi | (t << shift);
                mask_hi = m_hi | (0xFFu << shift);
            } else {
                found_lo = f_lo | (t << shift);
                mask_lo = m_lo | (0xFFu << shift);
            }
            want = rest;
            done = u32(h == rest);
        }
        if (t == 0u && s < wanted) {
            // Fewer than K non-NaN elements in all (only at the first digit): take all.
            done = 1u;
        }
        atomicStore(&hist[t], 0u);
    }
    workgroupBarrier();
    let f_hi = found_hi;
    let f_lo = found_lo;
    let m_hi = mask_hi;
    let m_lo = mask_lo;
    for (var j = t; j < items; j += WG) {
        let e = element(base, j);
        let hi = value_key(e);
        let lo = ~e.x;
        let h = hi & m_hi;
        if (hi != 0u && (h > f_hi || (h == f_hi && (lo & m_lo) >= f_lo))) {
            let slot = atomicAdd(&count, 1u);
            if (slot < K) {
                chosen[slot] = e;
            }
        }
    }
    workgroupBarrier();
    let n = min(atomicLoad(&count), K);
    if (PASS == 0u) {
        if (t < K) {
            var e = vec2<u32>(NONE, 0u);
            if (t < n) {
                e = chosen[t];
            }
            partial[wid.x * K + t] = e;
        }
        return;
    }
    // Rank sort: four invocations per entry, each counting the entries among 16 that
    // beat it (the order is strict: indices differ).
    let me = t / 4u;
    if (me < n) {
        let mine = chosen[me];
        var beaten = 0u;
        let first = (t % 4u) * 16u;
        for (var j = first; j < min(first + 16u, n); j++) {
            beaten += u32(beats(chosen[j], mine));
        }
        atomicAdd(&rank[me], beaten);
    }
    workgroupBarrier();
    if (t < K) {
        if (t < n) {
            result[atomicLoad(&rank[t])] = chosen[t];
        } else {
            result[t] = vec2<u32>(NONE, 0u);
        }
    }
}
