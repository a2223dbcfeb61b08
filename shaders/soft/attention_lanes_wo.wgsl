// The attention output projection W_o folded into the CPU-adapter decode attention's
// heads mapping (attention_lanes_heads.wgsl; appended by attention_lanes.rs when folded):
// the lane holding q head h's normalised output o_h (in its State, registers) writes head
// h's share of W_o · o for every hidden row r,
//   parts[h][r] = Σ_{c<HD} W_o[r][h·HD + c] · o_h[c],
// the layout of attention_wo.wgsl (the workgroup design's fold): the gate/up GEMV adds
// Σ_h parts[h] to the residual. The loop over rows is the wrapper's `state_project`
// (lanes_state.rs), unrolled over the head's HD / 8 code words so that o_h stays in
// registers; the lanes of a workgroup are the heads of one GQA group, each loading its
// own columns, 4 code words per `code4` (or one per `wo_word`, where a head's columns do
// not start a vec4 of words; both the wrapper's: from W_o's storage buffer or,
// where the decode GEMVs read textures, its texture copy: 16 bytes per lane and load on
// lavapipe, against 4 from a storage buffer). Histories of several splits fold in
// attention_lanes_combine.wgsl, the same way.
// W_o is Q4 g64, [HIDDEN][N_HEADS·HD]: codes u32[HIDDEN][N_HEADS·HD/8] (q4_unpack.wgsl's
// nibble order; `code4(i)`: words 4i..4i+3), qparams u32[HIDDEN][N_HEADS·HD/64] =
// pack2x16float(scale, min), w = scale · code + min.

override HIDDEN: u32;

@group(0) @binding(10) var<storage, read> wo_qparams: array<u32>;
@group(0) @binding(11) var<storage, read_write> parts: array<f32>;

// The 8 codes of word w times the 8 output values o0, o1 (before scale and min).
fn wo_dot(w: u32, o0: vec4<f32>, o1: vec4<f32>) -> f32 {
    return dot(lo4(w), o0) + dot(hi4(w), o1);
}
