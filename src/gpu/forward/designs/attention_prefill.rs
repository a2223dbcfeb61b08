//! Which design computes prefill attention ([`AttentionPrefill`]): key tiles in
//! workgroup memory on GPUs (`kernels::attention_prefill`), 8 queries per workgroup
//! walking the keys in step on CPU adapters (`kernels::soft::attention_prefill_lanes`),
//! as [`AttentionPrefillVariant`] names it.

use crate::error::{Error, Result};
use crate::gpu::device::GpuContext;
use crate::gpu::kernels::attention_prefill::key_tiles_source;
use crate::gpu::kernels::common::attention_prefill::{AttentionPrefill, AttentionPrefillVariant};
use crate::gpu::kernels::common::rope_kv::HeadShape;
use crate::gpu::kernels::soft::attention_prefill_lanes;
use crate::gpu::profiled::ProfiledContext;

impl AttentionPrefill {
    /// Prefill attention for `shape` in the profile's variant.
    pub fn new(ctx: &ProfiledContext, shape: HeadShape) -> Result<AttentionPrefill> {
        Self::with_variant(ctx, ctx.profile.prefill_attention, shape)
    }

    /// Prefill attention for `shape` in `variant` (any variant runs on any adapter).
    pub fn with_variant(
        ctx: &GpuContext,
        variant: AttentionPrefillVariant,
        shape: HeadShape,
    ) -> Result<AttentionPrefill> {
        shape.check()?;
        if !shape.head_dim.is_multiple_of(4) {
            return Err(Error::InvalidArgument(format!(
                "prefill attention needs a head_dim that is a multiple of 4, not {}",
                shape.head_dim
            )));
        }
        let mut constants = shape.constants();
        let source = match variant {
            AttentionPrefillVariant::KeyTiles => key_tiles_source(shape, &mut constants),
            AttentionPrefillVariant::Lanes => attention_prefill_lanes::source(shape),
        };
        Ok(Self::build(ctx, variant, shape, &source, &constants))
    }
}
