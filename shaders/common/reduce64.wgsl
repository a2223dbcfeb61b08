// Shared by kernels that reduce across a 64-invocation workgroup (prepended to them).
// Each reduction costs two barriers: every invocation writes its value, then every
// invocation sums the 64 values itself (broadcast loads; cheap on CPU-backed adapters,
// where barriers, not loads, are the expensive part).

const RED_WIDTH: u32 = 64u;
var<workgroup> red_buf: array<f32, 64>;

fn workgroup_sum(v: f32, lid: u32) -> f32 {
    red_buf[lid] = v;
    workgroupBarrier();
    var s = 0.0;
    for (var i = 0u; i < RED_WIDTH; i++) {
        s += red_buf[i];
    }
    workgroupBarrier();
    return s;
}

fn workgroup_max(v: f32, lid: u32) -> f32 {
    red_buf[lid] = v;
    workgroupBarrier();
    var m = red_buf[0];
    for (var i = 1u; i < RED_WIDTH; i++) {
        m = max(m, red_buf[i]);
    }
    workgroupBarrier();
    return m;
}
