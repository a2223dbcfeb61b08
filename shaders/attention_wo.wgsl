// The attention output projection W_o folded into attention (included by attention.wgsl
// and attention_combine.wgsl; wo_dot8 also by the group design's attention_group_wo.wgsl):
// once a workgroup holds q head h's normalised output o_h (HD values, in `o_head`, read
// as vec4s through `fold_o4(i)`), it writes head h's share of W_o · o for every hidden
// row r:
//   parts[h][r] = Σ_{c<HD} W_o[r][h·HD + c] · o_h[c]
// so that Σ_h parts[h] = W_o · o (the gate/up GEMV adds them to the residual).
// W_o is Q4 g64, [HIDDEN][N_HEADS·HD]: codes u32[HIDDEN][N_HEADS·HD/8] (nibbles as
// q4_unpack.wgsl's lo4/hi4 read them), qparams u32[HIDDEN][N_HEADS·HD/64] =
// pack2x16float(scale, min), w = scale · code + min. A head's HD columns (HD % 8 == 0,
// checked by the host) may cover part of a group or several, so every code word looks
// up its own group. The wrapper (attention.rs) declares the codes' binding (read through
// `wo_word(i)`, word i: the storage buffer or a texture copy), wo_qparams (array<u32>)
// and parts (array<f32>, read_write), `fold_o4` and `const WO_FOLD = true` (unfolded
// kernels get a stub o_head and project_head instead; the group design's kernels, which
// project a GQA group per part, leave project_head unused). The lanes design (CPU
// adapters) folds W_o its own way: attention_lanes_wo.wgsl.

override HIDDEN: u32;

// Row r of W_o at its code word `word` (columns 8·word .. 8·word + 7) dotted with those
// columns of o, o0 | o1.
fn wo_dot8(r: u32, word: u32, o0: vec4<f32>, o1: vec4<f32>) -> f32 {
    let w = wo_word(r * (N_HEADS * HD / 8u) + word);
    let p = unpack2x16float(wo_qparams[r * (N_HEADS * HD / 64u) + word / 8u]);
    return p.x * (dot(lo4(w), o0) + dot(hi4(w), o1)) + p.y * dot(o0 + o1, vec4<f32>(1.0));
}

// Write parts[h][..] from o_head (filled and behind a barrier). No barriers inside.
fn project_head(h: u32, lid: u32) {
    for (var r = lid; r < HIDDEN; r += 64u) {
        var acc = 0.0;
        for (var j = 0u; j < HD / 8u; j++) {
            acc += wo_dot8(r, h * HD / 8u + j, fold_o4(2u * j), fold_o4(2u * j + 1u));
        }
        parts[h * HIDDEN + r] = acc;
    }
}
