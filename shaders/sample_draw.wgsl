// A sampled decode step's draw on the GPU, from the top-k kernel's K = 64 candidates
// (topk.wgsl's result: (index, f32 bits), best first, unused ones index NONE) with the
// uniform number r the host's seeded generator supplies: src/sampler.rs's `draw` in f32.
// At the temperature (inv_t = 1 / T): the first top_k candidates, weights
// w_i = exp((v_i − v_0) · inv_t) (the best's is 1); top-p: the shortest prefix whose
// Σ w / Σ_topk w reaches top_p; min-p: the prefix with w ≥ min_p; then the first
// candidate whose cumulative weight passes r · Σ kept w (the last kept one if rounding
// leaves none). A best logit that is not finite is chosen outright. The chosen token and
// its logit bits go to token[0], token[1], where the next step's embedding reads the
// token (TOKEN_ON_GPU) and the host reads it back; with no candidate (all logits NaN)
// token[0] is NONE. One invocation: 64 candidates, a few hundred operations.
// The CPU's draw is in f64: the two agree except where r · mass lies within f32 rounding
// (~1e-6 relative) of a cumulative weight, or a top-p / min-p cut that close to its
// threshold.

struct Draw {
    r: f32,
    inv_t: f32,
    top_k: u32,
    top_p: f32,
    min_p: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

const K: u32 = 64u;
const NONE: u32 = 0xFFFFFFFFu;

@group(0) @binding(0) var<storage, read> cands: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> token: array<u32>;
@group(0) @binding(2) var<uniform> params: Draw;

@compute @workgroup_size(1)
fn main() {
    var n = 0u;
    while (n < K && cands[n].x != NONE) {
        n++;
    }
    if (n == 0u) {
        token[0] = NONE;
        return;
    }
    let best_bits = cands[0].y;
    var chosen = 0u;
    if ((best_bits & 0x7F800000u) != 0x7F800000u) {
        let best = bitcast<f32>(best_bits);
        let k = min(params.top_k, n);
        var w: array<f32, K>;
        var total = 0.0;
        for (var i = 0u; i < k; i++) {
            w[i] = exp((bitcast<f32>(cands[i].y) - best) * params.inv_t);
            total += w[i];
        }
        var kept = k;
        if (params.top_p < 1.0) {
            var acc = 0.0;
            for (var i = 0u; i < k; i++) {
                acc += w[i] / total;
                if (acc >= params.top_p) {
                    kept = i + 1u;
                    break;
                }
            }
        }
        var m = 0u;
        while (m < kept && w[m] >= params.min_p) {
            m++;
        }
        kept = m;
        var mass = 0.0;
        for (var i = 0u; i < kept; i++) {
            mass += w[i];
        }
        var r = params.r * mass;
        chosen = kept - 1u;
        for (var i = 0u; i < kept; i++) {
            if (r < w[i]) {
                chosen = i;
                break;
            }
            r -= w[i];
        }
    }
    token[0] = cands[chosen].x;
    token[1] = cands[chosen].y;
}
