//! The decode GEMV's designs for CPU adapters (the `lavapipe` and `swiftshader`
//! profiles): no barriers, each invocation computes several output rows (`RowsLayout`)
//! with the codes read from a texture, in row-major order (shaders/soft/gemv_q4_rows.wgsl)
//! or in tile order (shaders/soft/gemv_q4_tiled.wgsl, its blocks written out per layout),
//! each group's x loaded by every invocation or through the subgroup (`XLoads`).
//! `common::gemv::GemvQ4` is the wrapper (the layouts: `common::gemv_spec`).

use crate::gpu::kernels::common::gemv_spec::{RowsLayout, XLoads};
use crate::gpu::kernels::common::q4_codes::CodesRead;

const ROWS_WGSL: &str = include_str!("../../../../shaders/soft/gemv_q4_rows.wgsl");
const TILED_WGSL: &str = include_str!("../../../../shaders/soft/gemv_q4_tiled.wgsl");
const X_GROUP_WGSL: &str = include_str!("../../../../shaders/soft/gemv_q4_xgroup.wgsl");
const X_GROUP_LANES_WGSL: &str = include_str!("../../../../shaders/soft/gemv_q4_xgroup_lanes.wgsl");
const X_SCALED_WGSL: &str = include_str!("../../../../shaders/soft/gemv_q4_xscaled.wgsl");

/// `src` (a rows GEMV shader) with its `//#x_group` line replaced by the group's x loads,
/// and, for subgroup loads, the subgroup invocation id `sid` declared at its
/// `//#subgroup_lane` line.
fn with_x_group(src: &str, loads: XLoads) -> String {
    let group = match loads {
        XLoads::Each => X_GROUP_WGSL,
        XLoads::Subgroup => X_GROUP_LANES_WGSL,
    };
    src.replace("//#x_group\n", &[group, X_SCALED_WGSL].concat())
        .replace("//#subgroup_lane\n", loads.lane_param())
}

/// The body of a rows GEMV reading `codes` in `layout` (`parts` matrix rows per output
/// row): shaders/soft/gemv_q4_rows.wgsl for the row-major texture, the tiles shader
/// written out for its layout for tile order.
pub(crate) fn body(codes: CodesRead, layout: RowsLayout, parts: usize, loads: XLoads) -> String {
    match codes {
        CodesRead::Tiles(tile) => tiled_body(layout.rows as usize, parts, tile.qpt, loads),
        _ => with_x_group(ROWS_WGSL, XLoads::Each),
    }
}

/// shaders/soft/gemv_q4_tiled.wgsl written out for `rows` output rows of `parts` slots each
/// and `qpt` groups per chunk (its `//#` blocks repeated, see the shader's header).
fn tiled_body(rows: usize, parts: usize, qpt: usize, loads: XLoads) -> String {
    let src = with_x_group(TILED_WGSL, loads);
    let src = repeat_blocks(&src, "groups", qpt, |j| vec![("$j", j.to_string())]);
    let src = repeat_blocks(&src, "slots", rows * parts, |k| vec![("$k", k.to_string())]);
    repeat_blocks(&src, "rows", rows, |i| {
        vec![
            ("$i", i.to_string()),
            ("$g", (i * parts).to_string()),
            ("$u", (i * parts + parts - 1).to_string()),
        ]
    })
}

/// `src` with every block between the lines `//#name` and `//#end name` written `count`
/// times, the n-th with the substitutions `subst(n)`.
fn repeat_blocks(
    src: &str,
    name: &str,
    count: usize,
    subst: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> String {
    let (open, close) = (format!("//#{name}\n"), format!("//#end {name}\n"));
    let mut out = String::new();
    let mut rest = src;
    while let Some(start) = rest.find(&open) {
        out.push_str(&rest[..start]);
        let body_start = start + open.len();
        let len = rest[body_start..]
            .find(&close)
            .expect("gemv_q4_tiled.wgsl: every block is closed");
        let body = &rest[body_start..body_start + len];
        for n in 0..count {
            let mut b = body.to_string();
            for (from, to) in subst(n) {
                b = b.replace(from, &to);
            }
            out.push_str(&b);
        }
        rest = &rest[body_start + len + close.len()..];
    }
    out.push_str(rest);
    out
}
