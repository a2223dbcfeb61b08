// The attention output projection W_o folded into attention (included by attention.wgsl
// and attention_combine.wgsl): once a workgroup holds the normalised outputs o_h of
// `count` consecutive q heads (HD values each, in `o_head`), it writes their share of
// W_o · o for every hidden row r to part p:
//   parts[p][r] = Σ_{first ≤ h < first + count} Σ_{c<HD} W_o[r][h·HD + c] · o_h[c]
// so that Σ_p parts[p] = W_o · o (the gate/up GEMV adds them to the residual). The
// workgroup design writes a part per head; the lanes design (CPU adapters) one per
// workgroup of its heads mapping: up to 8 heads of a GQA group (attention_lanes_wo.wgsl).
// W_o is Q4 g64, [HIDDEN][N_HEADS·HD]: codes u32[HIDDEN][N_HEADS·HD/8] (nibbles as
// q4_unpack.wgsl's lo4/hi4 read them), qparams u32[HIDDEN][N_HEADS·HD/64] =
// pack2x16float(scale, min), w = scale · code + min. A head's HD columns (HD % 8 == 0,
// checked by the host) may cover part of a group or several, so every code word looks
// up its own group. The wrapper (attention.rs) declares the bindings of the codes (read
// through `wo_word(i)`, word i: from the storage buffer or a texture copy), wo_qparams
// (array<u32>) and parts (array<f32>, read_write), `o_head`
// (array<f32>, as long as the outputs it holds) and `const WO_FOLD = true` (unfolded
// kernels get o_head and a stub project_heads instead).

override HIDDEN: u32;

// Write parts[part][..] from o_head (filled and behind a barrier): heads first..first +
// count, whose columns are consecutive. No barriers inside.
fn project_heads(first: u32, count: u32, part: u32, lid: u32) {
    let words = N_HEADS * HD / 8u;
    let groups = N_HEADS * HD / 64u;
    let col0 = first * HD;
    for (var r = lid; r < HIDDEN; r += 64u) {
        var acc = 0.0;
        for (var c = 0u; c < count * HD; c += 8u) {
            let o0 = vec4<f32>(o_head[c], o_head[c + 1u], o_head[c + 2u], o_head[c + 3u]);
            let o1 = vec4<f32>(o_head[c + 4u], o_head[c + 5u], o_head[c + 6u], o_head[c + 7u]);
            let w = wo_word(r * words + (col0 + c) / 8u);
            let p = unpack2x16float(wo_qparams[r * groups + (col0 + c) / 64u]);
            acc += p.x * (dot(lo4(w), o0) + dot(hi4(w), o1)) + p.y * dot(o0 + o1, vec4<f32>(1.0));
        }
        parts[part * HIDDEN + r] = acc;
    }
}
