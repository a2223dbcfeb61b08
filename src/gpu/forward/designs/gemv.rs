//! Which design computes a decode GEMV: the GPU rows design (`kernels::gemv_q4`) or the
//! CPU adapters' rows designs (`kernels::soft::gemv_rows`), as [`GemvVariant`] names it;
//! the wrapper they share is `kernels::common::gemv`.

use crate::error::Result;
use crate::gpu::kernels::common::gemv::{GemvDesignSource, GemvQ4};
use crate::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, GemvVariant, RowsLayout};
use crate::gpu::kernels::soft::gemv_rows;
use crate::gpu::profiled::ProfiledContext;

impl GemvQ4 {
    /// The GEMV of `spec` in `variant`, in the variant's rows layout
    /// ([`RowsLayout::for_variant`]).
    pub fn new(ctx: &ProfiledContext, variant: GemvVariant, spec: GemvSpec) -> Result<GemvQ4> {
        Self::with_layout(
            ctx,
            variant,
            spec,
            RowsLayout::for_variant(variant, spec.epilogue.parts()),
        )
    }

    /// [`GemvQ4::new`] with an explicit rows layout (ignored by the workgroup variant).
    pub fn with_layout(
        ctx: &ProfiledContext,
        variant: GemvVariant,
        spec: GemvSpec,
        layout: RowsLayout,
    ) -> Result<GemvQ4> {
        // x staged per workgroup only where it fits workgroup memory (the label names
        // the design that runs).
        let argmax = spec.epilogue == Epilogue::StoreArgmax;
        let variant = match variant {
            GemvVariant::GpuRows(g) => GemvVariant::GpuRows(g.fitted(spec.k, argmax)),
            other => other,
        };
        let subgroup_size = ctx.profile.subgroup_size;
        GemvQ4::build(ctx, variant, spec, (layout, subgroup_size), |d| {
            Ok(match variant {
                GemvVariant::RowsFromTexture | GemvVariant::RowsFromTiles => {
                    let parts = d.spec.epilogue.parts();
                    GemvDesignSource {
                        enables: "",
                        body: gemv_rows::body(d.codes, d.layout, parts, d.x_loads),
                    }
                }
                GemvVariant::GpuRows(g) => {
                    g.check(ctx)?;
                    GemvDesignSource {
                        enables: g.enables(),
                        body: g.wgsl(d.argmax, d.spec.format, d.spec.k),
                    }
                }
            })
        })
    }
}
