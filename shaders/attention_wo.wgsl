// The attention output projection W_o folded into attention (included by attention.wgsl
// and attention_combine.wgsl): once a workgroup holds q head h's normalised output o_h
// (HD values, in `o_head`), it writes head h's share of W_o · o for every hidden row r:
//   parts[h][r] = Σ_{c<HD} W_o[r][h·HD + c] · o_h[c]
// so that Σ_h parts[h] = W_o · o (the gate/up GEMV adds them to the residual).
// W_o is Q4 g64, [HIDDEN][N_HEADS·HD]: codes u32[HIDDEN][N_HEADS·HD/8] (nibbles as
// q4_unpack.wgsl's lo4/hi4 read them), qparams u32[HIDDEN][N_HEADS·HD/64] =
// pack2x16float(scale, min), w = scale · code + min. A head's HD columns (HD % 8 == 0,
// checked by the host) may cover part of a group or several, so every code word looks
// up its own group. The wrapper (attention.rs) declares the codes' binding (read through
// `wo_word(i)`, word i: the storage buffer or a texture copy), wo_qparams (array<u32>)
// and parts (array<f32>, read_write), and `const WO_FOLD = true` (unfolded kernels get a
// stub o_head and project_head instead). The lanes design (CPU adapters) folds W_o its
// own way: attention_lanes_wo.wgsl.

override HIDDEN: u32;

// Write parts[h][..] from o_head (filled and behind a barrier). No barriers inside.
fn project_head(h: u32, lid: u32) {
    let words = N_HEADS * HD / 8u;
    let groups = N_HEADS * HD / 64u;
    let col0 = h * HD;
    for (var r = lid; r < HIDDEN; r += 64u) {
        var acc = 0.0;
        for (var j = 0u; j < HD / 8u; j++) {
            let c = 8u * j;
            let o0 = vec4<f32>(o_head[c], o_head[c + 1u], o_head[c + 2u], o_head[c + 3u]);
            let o1 = vec4<f32>(o_head[c + 4u], o_head[c + 5u], o_head[c + 6u], o_head[c + 7u]);
            let w = wo_word(r * words + (col0 + c) / 8u);
            let p = unpack2x16float(wo_qparams[r * groups + (col0 + c) / 64u]);
            acc += p.x * (dot(lo4(w), o0) + dot(hi4(w), o1)) + p.y * dot(o0 + o1, vec4<f32>(1.0));
        }
        parts[h * HIDDEN + r] = acc;
    }
}
