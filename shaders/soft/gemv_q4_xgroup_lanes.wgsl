// The x values of one group of 64 (gemv_q4_xgroup.wgsl's x0..xf, xsum, s0..sf and Σx²)
// loaded through the subgroup, written by gemv_q4.rs in place of the tiles GEMV's
// `//#x_group` line when its 8-invocation workgroup is one subgroup of 8 (lavapipe).
// Invocation `sid` loads the group's vec4s sid and 8 + sid, and subgroupBroadcast hands
// every invocation all 16. On lavapipe every load whose index is not a constant is a
// gather of 8 lanes, so the 16 loads of x (and 16 of the norm weights) that every
// invocation made were ~30% of the GEMV; here each is 2 gathers of distinct values, and a
// broadcast is a lane extract.
let ra = x_in(xb + sid);
let rb = x_in(xb + 8u + sid);
if (NORM) {
    sum_sq += subgroupAdd(dot(ra, ra) + dot(rb, rb));
}
let la = normed(ra, xb + sid);
let lb = normed(rb, xb + 8u + sid);
let x0 = subgroupBroadcast(la, 0u); let x1 = subgroupBroadcast(la, 1u);
let x2 = subgroupBroadcast(la, 2u); let x3 = subgroupBroadcast(la, 3u);
let x4 = subgroupBroadcast(la, 4u); let x5 = subgroupBroadcast(la, 5u);
let x6 = subgroupBroadcast(la, 6u); let x7 = subgroupBroadcast(la, 7u);
let x8 = subgroupBroadcast(lb, 0u); let x9 = subgroupBroadcast(lb, 1u);
let xa = subgroupBroadcast(lb, 2u); let xbb = subgroupBroadcast(lb, 3u);
let xc = subgroupBroadcast(lb, 4u); let xd = subgroupBroadcast(lb, 5u);
let xe = subgroupBroadcast(lb, 6u); let xf = subgroupBroadcast(lb, 7u);
