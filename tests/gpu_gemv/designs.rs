//! The GEMV kernel designs a case runs in: the profiles' designs, every design and layout
//! (Q4 and Q8), and the staged-x / one-barrier designs.

use crate::gpu_common::gpu;
use pocketrt::gpu::kernels::common::gemv::GemvQ4;
use pocketrt::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, GemvVariant};
use pocketrt::gpu::kernels::common::gemv_spec::{GpuRows, RowsLayout, SlotReduce, XLoads};
use pocketrt::gpu::kernels::MatrixFormat;

/// Which kernel designs a case runs in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Layouts {
    /// The designs the device profiles run (default tier): the GPU rows variant in the
    /// `gpu` profile's layout (and in f16), the subgroup slots of `gpu-subgroups`, the
    /// row-major texture and tiles variants in their default layouts.
    Profiles,
    /// Every design of [`kernels`] (the long tier; the default tier runs one case so).
    Every,
    /// The designs that stage x once per workgroup or reduce a slot in one barrier
    /// ([`staged_kernels`]).
    Staged,
}

/// Every kernel design: the GPU rows variant in several layouts (lanes per slot, slots,
/// rows per slot; tree and subgroup reductions), and the CPU adapters' rows variants
/// (row-major texture, tiles) in their default layouts and in layouts with other
/// workgroup widths and rows per invocation; only the profiles' designs with
/// [`Layouts::Profiles`] (each list's first entry is the profile's).
pub fn kernels(spec: GemvSpec, layouts: Layouts) -> Vec<(String, GemvQ4)> {
    let ctx = gpu();
    let mut out = vec![];
    let every = layouts == Layouts::Every;
    let pick = |n: usize| if every { n } else { 1 };
    if layouts == Layouts::Staged {
        return staged_kernels(spec);
    }
    if spec.format == MatrixFormat::Q8 {
        return q8_kernels(spec, layouts);
    }
    let gpu_layouts = [(16, 8, 2), (32, 4, 1), (4, 2, 3), (1, 64, 8), (64, 1, 5)];
    for (tpr, slots, rps) in gpu_layouts.into_iter().take(pick(5)) {
        let g = GpuRows {
            tpr,
            slots,
            rps,
            reduce: SlotReduce::Tree,
            f16: false,
            x_shared: false,
        };
        let k = GemvQ4::new(ctx, GemvVariant::GpuRows(g), spec).unwrap();
        out.push((format!("{g:?}"), k));
    }
    // The subgroup reduction where a slot is one subgroup of the test device (lavapipe: 8).
    if let Some(width) = ctx.profile.subgroup_size {
        for rps in [2, 1, 7].into_iter().take(pick(3)) {
            let g = GpuRows {
                tpr: width,
                slots: 128 / width,
                rps,
                reduce: SlotReduce::Subgroup,
                f16: false,
                x_shared: false,
            };
            let k = GemvQ4::new(ctx, GemvVariant::GpuRows(g), spec).unwrap();
            out.push((format!("{g:?}"), k));
        }
    }
    // x in f16 where the test device has shader-f16 (lavapipe has): the gpu profile's
    // layout, tree and subgroup slots.
    if ctx.adapter.features.shader_f16 {
        let tree = GpuRows {
            tpr: 16,
            slots: 8,
            rps: 2,
            reduce: SlotReduce::Tree,
            f16: true,
            x_shared: false,
        };
        let mut f16_layouts = vec![tree];
        if every {
            f16_layouts.push(GpuRows { rps: 5, ..tree });
        }
        if let (Some(width), true) = (ctx.profile.subgroup_size, every) {
            f16_layouts.push(GpuRows {
                tpr: width,
                slots: 128 / width,
                reduce: SlotReduce::Subgroup,
                ..tree
            });
        }
        for g in f16_layouts {
            let k = GemvQ4::new(ctx, GemvVariant::GpuRows(g), spec).unwrap();
            out.push((format!("{g:?}"), k));
        }
    }
    let default = RowsLayout::default_for(spec.epilogue.parts());
    // The row-major texture variant in its own layout and others; the tiles variant,
    // whose tile order follows its layout (and K: 1, 2 or 4 groups of qparams per texel).
    // Its 8-wide layouts load x through the subgroup where the profile uses 8-wide
    // subgroups (lavapipe's), the 4-wide one invocation by invocation.
    let k = GemvQ4::new(ctx, GemvVariant::RowsFromTexture, spec);
    out.push(("from row-major texture".to_string(), k.unwrap()));
    let row_major = [
        default,
        RowsLayout { wg: 64, rows: 4 },
        RowsLayout { wg: 8, rows: 3 },
    ];
    for layout in row_major.into_iter().take(pick(3)) {
        let k = GemvQ4::with_layout(ctx, GemvVariant::RowsFromTexture, spec, layout);
        out.push((format!("{layout:?} from row-major texture"), k.unwrap()));
    }
    let tiles = [
        default,
        RowsLayout { wg: 8, rows: 3 },
        RowsLayout { wg: 4, rows: 3 },
    ];
    for layout in tiles.into_iter().take(pick(3)) {
        let k = GemvQ4::with_layout(ctx, GemvVariant::RowsFromTiles, spec, layout).unwrap();
        let expected = match (layout.wg, ctx.profile.subgroup_size) {
            (8, Some(8)) => XLoads::Subgroup,
            _ => XLoads::Each,
        };
        assert_eq!(k.x_loads(), expected, "{layout:?} in {}", ctx.profile);
        out.push((format!("{layout:?} from tiles, x loads {expected:?}"), k));
    }
    out
}

/// The Q8 GEMV in the GPU rows design: the profiles' Q8 layout (tree and, where the test
/// device has fixed-width subgroups, one slot per subgroup) and with [`Layouts::Every`]
/// the Q4 design's other layouts.
fn q8_kernels(spec: GemvSpec, layouts: Layouts) -> Vec<(String, GemvQ4)> {
    let ctx = gpu();
    let every = layouts == Layouts::Every;
    let mut rows = vec![ctx.profile.q8.gemv];
    let tree = |(tpr, slots, rps)| GpuRows {
        tpr,
        slots,
        rps,
        reduce: SlotReduce::Tree,
        f16: false,
        x_shared: false,
    };
    rows.push(tree((16, 8, 2)));
    if let Some(width) = ctx.profile.subgroup_size {
        rows.push(GpuRows {
            tpr: width,
            slots: 128 / width,
            rps: 2,
            reduce: SlotReduce::Subgroup,
            f16: false,
            x_shared: false,
        });
    }
    if every {
        rows.extend([(32, 4, 1), (4, 2, 3), (1, 64, 8), (64, 1, 5)].map(tree));
    }
    rows.dedup();
    let f16 = GpuRows {
        f16: true,
        ..rows[0]
    };
    let refused = GemvQ4::new(ctx, GemvVariant::GpuRows(f16), spec);
    assert!(refused.is_err(), "the Q8 GEMV holds x in f32 only");
    let refused = GemvQ4::new(ctx, GemvVariant::RowsFromTiles, spec);
    assert!(refused.is_err(), "the Q8 GEMV is the GPU rows design only");
    rows.into_iter()
        .map(|g| {
            let k = GemvQ4::new(ctx, GemvVariant::GpuRows(g), spec).unwrap();
            (format!("q8 {g:?}"), k)
        })
        .collect()
}

/// x staged per workgroup (`x_shared`) and the one-barrier slot reduction, alone and
/// together, in the gpu profile's layout and one whose rows (6) divide none of the test
/// sizes (2 slots × 4 lanes × 3 rows); with subgroup slots and (Q4) f16 x where the test
/// device has them. Where the staged x does not fit workgroup memory the GEMV falls back
/// to the plain design (checked here: `x_shared` off in the kernel's variant).
fn staged_kernels(spec: GemvSpec) -> Vec<(String, GemvQ4)> {
    let ctx = gpu();
    let base = GpuRows {
        tpr: 16,
        slots: 8,
        rps: 2,
        reduce: SlotReduce::Tree,
        f16: false,
        x_shared: true,
    };
    let one_barrier = GpuRows {
        reduce: SlotReduce::OneBarrier,
        ..base
    };
    let mut rows = vec![
        base,
        GpuRows {
            x_shared: false,
            ..one_barrier
        },
        one_barrier,
        GpuRows {
            tpr: 4,
            slots: 2,
            rps: 3,
            ..one_barrier
        },
    ];
    if let Some(width) = ctx.profile.subgroup_size {
        rows.push(GpuRows {
            tpr: width,
            slots: 128 / width,
            reduce: SlotReduce::Subgroup,
            ..base
        });
    }
    if ctx.adapter.features.shader_f16 && spec.format == MatrixFormat::Q4 {
        rows.push(GpuRows { f16: true, ..base });
    }
    let argmax = spec.epilogue == Epilogue::StoreArgmax;
    rows.into_iter()
        .map(|g| {
            let k = GemvQ4::new(ctx, GemvVariant::GpuRows(g), spec).unwrap();
            let fits = g.workgroup_bytes(spec.k, argmax) <= GpuRows::WORKGROUP_BYTES;
            let want = GemvVariant::GpuRows(GpuRows {
                x_shared: g.x_shared && fits,
                ..g
            });
            assert_eq!(k.variant(), want, "K {}: staged where it fits", spec.k);
            (format!("{:?} {g:?}", spec.format), k)
        })
        .collect()
}
