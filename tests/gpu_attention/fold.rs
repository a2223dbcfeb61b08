//! The W_o-fold designs (every one, and those the profiles decode with) and the checks
//! that run the attention with the output projection folded in.

use crate::check::{check_attention_design, Design};
use crate::gpu_common::gpu;
use pocketrt::gpu::kernels::common::attention::{AttentionVariant, WoBlocks};
use pocketrt::gpu::kernels::common::gemv_spec::TextureOrder;
use pocketrt::gpu::kernels::common::rope_kv::HeadShape;

/// The GPU profiles' W_o blocks (32 rows, 8 lanes per row).
pub const BLOCKS: WoBlocks = WoBlocks { rows: 32, lanes: 8 };

/// [`check_attention`] in every design with the output projection (`hidden` rows, random
/// Q4 W_o) folded in, its codes read from the storage buffer and (the lanes design, as on
/// CPU adapters) from either texture order, the group design in [`BLOCKS`]: then each
/// part must equal W_o's columns of its heads times the reference output of those heads,
/// and Σ parts the whole W_o · o.
pub fn check_attention_folding(
    shape: HeadShape,
    qk_norm: bool,
    pos: usize,
    split_len: usize,
    seed: u64,
    hidden: usize,
    designs: &[FoldDesign],
) {
    for &(variant, order) in designs {
        if variant == AttentionVariant::Group {
            if AttentionVariant::Group.fits(shape, true) {
                check_group_folding(shape, qk_norm, (pos, split_len), seed, (hidden, BLOCKS));
            }
            continue;
        }
        let design = Design::folded(variant, shape, hidden, order, BLOCKS);
        check_attention_design(gpu(), shape, qk_norm, pos, split_len, seed, design);
    }
}

/// A design that folds W_o: the attention variant and where its W_o codes are read (the
/// storage buffer, or a texture in this order; the group design reads the buffer).
pub type FoldDesign = (AttentionVariant, Option<TextureOrder>);

/// Every fold design (the group design where the GQA group fits).
pub const EVERY_FOLD: [FoldDesign; 5] = [
    (AttentionVariant::Workgroup, None),
    (AttentionVariant::Lanes, None),
    (AttentionVariant::Lanes, Some(TextureOrder::RowMajor)),
    (AttentionVariant::Lanes, Some(TextureOrder::Tiles)),
    (AttentionVariant::Group, None),
];

/// The fold designs a profile decodes with: the `gpu` profile's group design, lavapipe's
/// lanes design on tile-order textures, and the workgroup design both fall back to where
/// their own does not fit the heads.
pub const PROFILES_FOLDS: [FoldDesign; 3] = [
    (AttentionVariant::Group, None),
    (AttentionVariant::Lanes, Some(TextureOrder::Tiles)),
    (AttentionVariant::Workgroup, None),
];

/// [`check_attention_design`] at `pos` with `split_len` positions per split, in the group
/// design with W_o (`hidden` rows) folded in, spread in `blocks`: one part per KV head
/// (its GQA group's heads).
pub fn check_group_folding(
    shape: HeadShape,
    qk_norm: bool,
    (pos, split_len): (usize, usize),
    seed: u64,
    (hidden, blocks): (usize, WoBlocks),
) {
    let design = Design::folded(AttentionVariant::Group, shape, hidden, None, blocks);
    check_attention_design(gpu(), shape, qk_norm, pos, split_len, seed, design);
}
