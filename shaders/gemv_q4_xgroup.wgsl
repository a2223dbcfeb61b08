// The x values of one group of 64, written by gemv_q4.rs in place of the `//#x_group`
// line of the rows GEMV shaders (after `let xb`, the group's first vec4): x0..xf (x_in times the norm weights when NORM), their
// sum xsum, and s0..sf pre-scaled for dot32_scaled. Loaded once per group, shared by every
// row an invocation computes.
let x0 = xn(xb); let x1 = xn(xb + 1u); let x2 = xn(xb + 2u); let x3 = xn(xb + 3u);
let x4 = xn(xb + 4u); let x5 = xn(xb + 5u); let x6 = xn(xb + 6u); let x7 = xn(xb + 7u);
let x8 = xn(xb + 8u); let x9 = xn(xb + 9u); let xa = xn(xb + 10u); let xbb = xn(xb + 11u);
let xc = xn(xb + 12u); let xd = xn(xb + 13u); let xe = xn(xb + 14u); let xf = xn(xb + 15u);
let xsum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7
             + x8 + x9 + xa + xbb + xc + xd + xe + xf, vec4<f32>(1.0));
let s0 = x0 * X_SCALE; let s1 = x1 * X_SCALE; let s2 = x2 * X_SCALE; let s3 = x3 * X_SCALE;
let s4 = x4 * X_SCALE; let s5 = x5 * X_SCALE; let s6 = x6 * X_SCALE; let s7 = x7 * X_SCALE;
let s8 = x8 * X_SCALE; let s9 = x9 * X_SCALE; let sa = xa * X_SCALE; let sb = xbb * X_SCALE;
let sc = xc * X_SCALE; let sd = xd * X_SCALE; let se = xe * X_SCALE; let sf = xf * X_SCALE;
