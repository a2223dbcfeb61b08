// The tail of the group's x loads (gemv_q4_xgroup.wgsl, gemv_q4_xgroup_lanes.wgsl), after
// x0..xf: their sum xsum and s0..sf, pre-scaled for dot32_scaled.
let xsum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7
             + x8 + x9 + xa + xbb + xc + xd + xe + xf, vec4<f32>(1.0));
let s0 = x0 * X_SCALE; let s1 = x1 * X_SCALE; let s2 = x2 * X_SCALE; let s3 = x3 * X_SCALE;
let s4 = x4 * X_SCALE; let s5 = x5 * X_SCALE; let s6 = x6 * X_SCALE; let s7 = x7 * X_SCALE;
let s8 = x8 * X_SCALE; let s9 = x9 * X_SCALE; let sa = xa * X_SCALE; let sb = xbb * X_SCALE;
let sc = xc * X_SCALE; let sd = xd * X_SCALE; let se = xe * X_SCALE; let sf = xf * X_SCALE;
