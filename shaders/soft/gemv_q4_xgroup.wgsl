// The x values of one group of 64, written by gemv_q4.rs in place of the `//#x_group`
// line of the rows GEMV shaders (after `let xb`, the group's first vec4, and with
// `var sum_sq` declared): x0..xf (x_in times the norm weights when NORM), followed by
// gemv_q4_xscaled.wgsl. Loaded once per group, shared by every row an invocation computes. With NORM the group's Σx² goes into sum_sq here, from the same loads:
// a separate loop over x costs ~14% of the head GEMV on lavapipe, whose loads indexed by a
// loop counter are per-lane gathers.
let r0 = x_in(xb); let r1 = x_in(xb + 1u); let r2 = x_in(xb + 2u); let r3 = x_in(xb + 3u);
let r4 = x_in(xb + 4u); let r5 = x_in(xb + 5u); let r6 = x_in(xb + 6u); let r7 = x_in(xb + 7u);
let r8 = x_in(xb + 8u); let r9 = x_in(xb + 9u); let ra = x_in(xb + 10u); let rb = x_in(xb + 11u);
let rc = x_in(xb + 12u); let rd = x_in(xb + 13u); let re = x_in(xb + 14u); let rf = x_in(xb + 15u);
if (NORM) {
    sum_sq += dot(r0, r0) + dot(r1, r1) + dot(r2, r2) + dot(r3, r3)
            + dot(r4, r4) + dot(r5, r5) + dot(r6, r6) + dot(r7, r7)
            + dot(r8, r8) + dot(r9, r9) + dot(ra, ra) + dot(rb, rb)
            + dot(rc, rc) + dot(rd, rd) + dot(re, re) + dot(rf, rf);
}
let x0 = normed(r0, xb); let x1 = normed(r1, xb + 1u); let x2 = normed(r2, xb + 2u);
let x3 = normed(r3, xb + 3u); let x4 = normed(r4, xb + 4u); let x5 = normed(r5, xb + 5u);
let x6 = normed(r6, xb + 6u); let x7 = normed(r7, xb + 7u); let x8 = normed(r8, xb + 8u);
let x9 = normed(r9, xb + 9u); let xa = normed(ra, xb + 10u); let xbb = normed(rb, xb + 11u);
let xc = normed(rc, xb + 12u); let xd = normed(rd, xb + 13u); let xe = normed(re, xb + 14u);
let xf = normed(rf, xb + 15u);
