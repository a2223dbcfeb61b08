//! The decode attention in every design (workgroup, group, lanes), with its fused
//! q/k-norm, RoPE and KV write (optionally split, with and without the output projection
//! folded in), against CPU references.
//!
//! Tiers (docs/TESTING.md): on lavapipe each new shape, split length or flag compiles
//! every pipeline anew (~5–25 s each, most of this binary's time), so the default tier
//! proves each claim once at the smallest shapes that exercise it; the `_long` twins
//! (`#[ignore]`d, `scripts/test --long`) add the other head widths and GQA layouts in
//! every design (heads of 256 in the lanes design among them), the single-split fold
//! cases and every profile at 32,768 keys.

#[path = "gpu_attention/check.rs"]
mod check;
#[path = "gpu_attention/fold.rs"]
mod fold;
mod gpu_common;

use check::{check_attention_design, Design};
use fold::{check_attention_folding, check_group_folding, BLOCKS, EVERY_FOLD, PROFILES_FOLDS};
use gpu_common::{gpu, profiles};
use pocketrt::gpu::forward::designs::Attention;
use pocketrt::gpu::kernels::attention_group::{MAX_SPLITS, MAX_SPLITS_UNFOLDED};
use pocketrt::gpu::kernels::common::attention::{AttentionVariant, WoBlocks, WoFold};
use pocketrt::gpu::kernels::common::q4_codes::CodesRead;
use pocketrt::gpu::kernels::common::rope_kv::HeadShape;
use pocketrt::gpu::ProfiledContext;

/// A head shape: q heads, KV heads, head_dim, cached positions.
fn heads(n_heads: usize, n_kv_heads: usize, head_dim: usize, context: usize) -> HeadShape {
    HeadShape {
        n_heads,
        n_kv_heads,
        head_dim,
        context,
    }
}

/// Every design fuses the q/k-norm, RoPE and KV write: every check_attention case checks
/// the written k and v and, through the output, the roped q. These add head shapes at the
/// cache's first and last positions.
#[test]
fn rope_and_kv_write_match_reference_at_first_and_last_position() {
    check_attention(heads(4, 2, 64, 50), true, 0, 64, 1);
    check_attention(heads(4, 2, 64, 50), true, 49, 64, 2);
    // head_dim 6 (the workgroup design only): rotation pairs (i, i + 3) straddle the
    // cache's packed pairs.
    check_attention(heads(2, 1, 6, 5), true, 3, 64, 7);
}

/// The same at the cache's last position with heads of 256 and of 128 without q/k-norm
/// (both widths are in the default tier at other positions).
#[test]
#[ignore = "long tier: more head widths"]
fn rope_and_kv_write_match_reference_at_the_last_position_long() {
    check_attention(heads(3, 1, 256, 8), true, 7, 64, 3);
    check_attention(heads(14, 2, 128, 20), false, 13, 64, 4);
}

#[test]
fn rope_stays_accurate_at_position_40959() {
    check_attention(heads(2, 1, 64, 40_960), true, 40_959, 4096, 5);
}

/// The decode attention at position `pos` (history of `pos + 1` positions) with
/// `split_len` positions per split, in every design that runs the shape (the group and
/// lanes designs where head_dim is a multiple of 4), against the reference: q/k normed and
/// roped, this step's k and v written to the cache (f16), the output over the cached
/// history plus this step. Earlier positions hold random f16 values; later ones stay zero.
fn check_attention(shape: HeadShape, qk_norm: bool, pos: usize, split_len: usize, seed: u64) {
    let all = [
        AttentionVariant::Workgroup,
        AttentionVariant::Group,
        AttentionVariant::Lanes,
    ];
    check_attention_in(&all, shape, qk_norm, pos, split_len, seed);
}

/// [`check_attention`] in those of `variants` that run the shape.
fn check_attention_in(
    variants: &[AttentionVariant],
    shape: HeadShape,
    qk_norm: bool,
    pos: usize,
    split_len: usize,
    seed: u64,
) {
    for &variant in variants.iter().filter(|v| v.fits(shape, false)) {
        let design = Design::Plain(variant);
        check_attention_design(gpu(), shape, qk_norm, pos, split_len, seed, design);
    }
}

const POCKET_HEADS: HeadShape = HeadShape {
    n_heads: 14,
    n_kv_heads: 2,
    head_dim: 64,
    context: 4100,
};

#[test]
fn attention_matches_reference_at_position_0_and_at_the_cache_end() {
    let shape = HeadShape {
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        context: 100,
    };
    check_attention(shape, true, 0, 256, 1);
    check_attention(shape, true, 99, 256, 2);
    check_attention(shape, false, 57, 256, 3);
    // Heads of 256 in the workgroup and group designs (the lanes design's takes lavapipe
    // ~1 minute to compile: the long twin below).
    let two_designs = [AttentionVariant::Workgroup, AttentionVariant::Group];
    check_attention_in(&two_designs, HEADS_OF_256, true, 65, 256, 4);
}

const HEADS_OF_256: HeadShape = HeadShape {
    n_heads: 2,
    n_kv_heads: 2,
    head_dim: 256,
    context: 70,
};

#[test]
#[ignore = "long tier: heads of 256 in the lanes design"]
fn attention_in_the_lanes_design_matches_reference_with_heads_of_256_long() {
    check_attention_in(&[AttentionVariant::Lanes], HEADS_OF_256, true, 65, 256, 4);
}

#[test]
fn split_attention_matches_reference_at_split_edges_1_63_64_65_and_1000() {
    // Histories of 1, 63, 64, 65 and 1000 positions with 64 per split: one split, one
    // full split, one split plus one position, 16 splits (the last one partial).
    for (i, len) in [1, 63, 64, 65, 1000].into_iter().enumerate() {
        check_attention(POCKET_HEADS, true, len - 1, 64, 10 + i as u64);
    }
    // The same lengths unsplit (one workgroup per head over the whole history).
    for (i, len) in [1, 63, 64, 65, 1000].into_iter().enumerate() {
        check_attention(POCKET_HEADS, true, len - 1, 4096, 20 + i as u64);
    }
}

#[test]
fn split_attention_matches_reference_at_4097_positions() {
    // Pocket's GPU split length (256) and the CPU adapters' (4096: one split plus one).
    check_attention(POCKET_HEADS, true, 4096, 256, 30);
    check_attention(POCKET_HEADS, true, 4096, 4096, 31);
}

/// The longest history in the test adapter's own profile (lavapipe in CI: its loop
/// limiter ends a shader's loops after 65,535 iterations in all), in its design and split
/// length and, where it folds W_o, with Pocket's 896-row W_o folded in.
#[test]
fn split_attention_matches_reference_at_32768_positions_in_the_adapters_profile() {
    check_attention_at_32768(gpu());
}

/// The same in every profile forced on the test adapter.
#[test]
#[ignore = "long tier: every profile at 32,768 keys"]
fn split_attention_matches_reference_at_32768_positions_in_every_profile_long() {
    for ctx in profiles() {
        check_attention_at_32768(ctx);
    }
}

/// 32,768 positions in `ctx`'s profile's own design and split length (and, where the
/// profile folds W_o, with Pocket's 896-row W_o folded in, its codes read as the
/// profile's decode GEMVs read them).
fn check_attention_at_32768(ctx: &ProfiledContext) {
    let shape = HeadShape {
        context: 32_768,
        ..POCKET_HEADS
    };
    let p = ctx.profile;
    let plain = Design::Plain(p.attention_for(shape, false));
    check_attention_design(ctx, shape, true, 32_767, p.split_len, 40, plain);
    if p.fold_output {
        let hidden = 896;
        let variant = p.attention_for(shape, true);
        let order = match variant {
            AttentionVariant::Lanes => p.code_textures,
            AttentionVariant::Workgroup | AttentionVariant::Group => None,
        };
        let folded = Design::folded(variant, shape, hidden, order, p.wo_blocks);
        check_attention_design(ctx, shape, true, 32_767, p.split_len, 41, folded);
    }
}

/// Heads of 16 (four per Q4 group; hidden rows not a multiple of the 64-wide workgroup).
const FOLD_NARROW: HeadShape = HeadShape {
    n_heads: 4,
    n_kv_heads: 2,
    head_dim: 16,
    context: 80,
};

/// Heads of 128 (two Q4 groups per head).
const FOLD_WIDE: HeadShape = HeadShape {
    n_heads: 2,
    n_kv_heads: 1,
    head_dim: 128,
    context: 80,
};

/// A GQA group of 10: the lanes design's parts hold 8 and 2 heads.
const FOLD_BIG_GROUP: HeadShape = HeadShape {
    n_heads: 10,
    n_kv_heads: 1,
    head_dim: 32,
    context: 40,
};

#[test]
fn folded_output_projection_matches_reference_single_and_split() {
    // Pocket's heads (64 values: one Q4 group per head): every design in 16 splits, the
    // profiles' designs at position 0 (one key, one split).
    check_attention_folding(POCKET_HEADS, true, 999, 64, 51, 896, &EVERY_FOLD);
    check_attention_folding(POCKET_HEADS, true, 0, 4096, 50, 896, &PROFILES_FOLDS);
    // The other head widths and the group of 10 (the lanes design's parts: 8 and 2 heads),
    // split (3 to 5 splits), a design each.
    let [group, lanes_tiles, workgroup] = PROFILES_FOLDS;
    for (shape, (variant, _)) in [
        (FOLD_NARROW, group),
        (FOLD_WIDE, workgroup),
        (FOLD_BIG_GROUP, lanes_tiles),
    ] {
        assert!(variant.fits(shape, true), "{variant:?} folds {shape:?}");
    }
    check_attention_folding(FOLD_NARROW, true, 70, 32, 54, 40, &[group]);
    check_attention_folding(FOLD_WIDE, true, 79, 16, 56, 72, &[workgroup]);
    check_attention_folding(FOLD_BIG_GROUP, true, 39, 16, 58, 64, &[lanes_tiles]);
}

/// The default tier's cases in every design, and the single-split ones at more positions
/// and head widths (no q/k-norm for heads of 16).
#[test]
#[ignore = "long tier: every fold design at every head width, single and split"]
fn folded_output_projection_matches_reference_in_every_design_long() {
    check_attention_folding(POCKET_HEADS, true, 0, 4096, 50, 896, &EVERY_FOLD);
    check_attention_folding(POCKET_HEADS, true, 999, 4096, 52, 896, &EVERY_FOLD);
    check_attention_folding(FOLD_NARROW, true, 70, 32, 54, 40, &EVERY_FOLD);
    check_attention_folding(FOLD_WIDE, true, 79, 16, 56, 72, &EVERY_FOLD);
    check_attention_folding(FOLD_BIG_GROUP, true, 39, 16, 58, 64, &EVERY_FOLD);
    check_attention_folding(FOLD_NARROW, false, 5, 256, 53, 40, &EVERY_FOLD);
    check_attention_folding(FOLD_WIDE, true, 3, 256, 55, 72, &EVERY_FOLD);
    check_attention_folding(FOLD_BIG_GROUP, true, 6, 256, 57, 64, &EVERY_FOLD);
}

#[test]
fn output_projection_fold_rejects_heads_not_a_multiple_of_8() {
    let odd = HeadShape {
        n_heads: 16,
        n_kv_heads: 2,
        head_dim: 12,
        context: 10,
    };
    assert!(!WoFold::can_fold(odd));
    let wo = WoFold {
        rows: 64,
        codes: CodesRead::Buffer,
        blocks: BLOCKS,
    };
    for v in [
        AttentionVariant::Workgroup,
        AttentionVariant::Group,
        AttentionVariant::Lanes,
    ] {
        let r = Attention::with_output_projection(gpu(), v, odd, false, 1e-6, 64, wo);
        assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
    }
    // The group design runs heads of 12 but does not fold them.
    let group = AttentionVariant::Group;
    assert!(group.fits(odd, false) && !group.fits(odd, true));
    assert!(WoFold::can_fold(POCKET_HEADS) && group.fits(POCKET_HEADS, true));
}

#[test]
fn group_fold_rejects_w_o_blocks_that_do_not_fit_its_workgroup() {
    // Pocket's group layout: 128 invocations. No rows, lanes not a power of two or wider
    // than the workgroup: typed errors.
    for blocks in [
        WoBlocks { rows: 0, lanes: 8 },
        WoBlocks { rows: 32, lanes: 3 },
        WoBlocks {
            rows: 32,
            lanes: 256,
        },
    ] {
        let wo = WoFold {
            rows: 896,
            codes: CodesRead::Buffer,
            blocks,
        };
        let group = AttentionVariant::Group;
        let r = Attention::with_output_projection(gpu(), group, POCKET_HEADS, true, 1e-6, 256, wo);
        assert!(
            matches!(r, Err(pocketrt::Error::InvalidArgument(_))),
            "{blocks:?}"
        );
    }
}

/// The group design with W_o folded in, one part per KV head, against the reference:
/// Pocket's shape (7:1, heads of 64) at position 0, the last position of one split, the
/// first of two and the cache's last (17 splits); 7:1 with heads of 128 (Qwen2.5's GQA at
/// twice the head); 1:1 with heads of 64 and 128; blocks of the profile's 32 rows, of rows
/// that divide neither W_o's rows nor a pass (7 rows, 4 lanes; 50 rows of 1 lane), and
/// one block of every row.
#[test]
fn group_attention_with_w_o_folded_per_kv_head_matches_reference() {
    let odd = WoBlocks { rows: 7, lanes: 4 };
    let narrow = WoBlocks { rows: 50, lanes: 1 };
    let whole = WoBlocks {
        rows: 4096,
        lanes: 16,
    };
    for (i, pos) in [0, 255, 256, 4099].into_iter().enumerate() {
        check_group_folding(POCKET_HEADS, true, (pos, 256), 80 + i as u64, (896, BLOCKS));
    }
    check_group_folding(POCKET_HEADS, true, (300, 256), 84, (896, odd));
    let qwen_128 = heads(14, 2, 128, 600);
    check_group_folding(qwen_128, true, (100, 256), 85, (896, BLOCKS));
    check_group_folding(qwen_128, false, (599, 256), 86, (200, narrow));
    let mha_64 = heads(4, 4, 64, 300);
    check_group_folding(mha_64, true, (0, 256), 87, (200, odd));
    check_group_folding(mha_64, true, (299, 64), 88, (200, BLOCKS));
    let mha_128 = heads(2, 2, 128, 300);
    check_group_folding(mha_128, false, (17, 256), 89, (136, whole));
    check_group_folding(mha_128, true, (299, 100), 90, (136, narrow));
    // Past MAX_SPLITS (32) splits the split length grows: short splits reach it cheaply
    // (999 / 16: 32 splits of 32 positions, not 63; 299 / 4: 30 of 10, not 75; 2,048 / 64
    // one past the edge: 32 of 65, not 33 of 64).
    assert_eq!(MAX_SPLITS, 32);
    check_group_folding(POCKET_HEADS, true, (999, 16), 91, (896, BLOCKS));
    check_group_folding(mha_64, true, (299, 4), 92, (200, odd));
    check_group_folding(POCKET_HEADS, true, (2048, 64), 93, (896, BLOCKS));
}

/// Unfolded too, past MAX_SPLITS_UNFOLDED (128) splits the group design's split length
/// grows, its grid, its kernel and the combine alike: 2,048 positions in 16-position
/// splits are 128 splits, 2,049 are 121 of 17 (not 129 of 16), 2,100 are 124 of 17.
#[test]
fn group_attention_caps_its_splits_unfolded_too() {
    assert_eq!(MAX_SPLITS_UNFOLDED, 128);
    let group = AttentionVariant::Group;
    let built = Attention::with_variant(gpu(), group, POCKET_HEADS, true, 1e-6, 16).unwrap();
    for (i, (pos, splits)) in [(2047, 128), (2048, 121), (2099, 124)]
        .into_iter()
        .enumerate()
    {
        assert_eq!(built.splits_at(pos), splits, "position {pos}");
        let design = Design::Plain(group);
        check_attention_design(gpu(), POCKET_HEADS, true, pos, 16, 94 + i as u64, design);
    }
}

#[test]
fn attention_shapes_that_do_not_divide_are_rejected() {
    let bad = HeadShape {
        n_heads: 3,
        n_kv_heads: 2,
        head_dim: 64,
        context: 10,
    };
    assert!(Attention::new(gpu(), bad, true, 1e-6, 64).is_err());
    assert!(Attention::new(
        gpu(),
        HeadShape {
            n_kv_heads: 1,
            ..bad
        },
        true,
        1e-6,
        0
    )
    .is_err());
    let too_wide = HeadShape {
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 512,
        context: 10,
    };
    for variant in [
        AttentionVariant::Workgroup,
        AttentionVariant::Group,
        AttentionVariant::Lanes,
    ] {
        let r = Attention::with_variant(gpu(), variant, too_wide, false, 1e-6, 64);
        assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
    }
    // The lanes and group designs read heads as vec4s.
    let hd6 = HeadShape {
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 6,
        context: 10,
    };
    for variant in [AttentionVariant::Group, AttentionVariant::Lanes] {
        let r = Attention::with_variant(gpu(), variant, hd6, true, 1e-6, 64);
        assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
    }
    // The group design holds a GQA group's queries and a chunk of its scores in 16 KiB of
    // workgroup memory: 32 heads of 128 per KV head do not fit.
    let wide_group = heads(32, 1, 128, 10);
    assert!(!AttentionVariant::Group.fits(wide_group, false));
    let group = AttentionVariant::Group;
    let r = Attention::with_variant(gpu(), group, wide_group, true, 1e-6, 64);
    assert!(matches!(r, Err(pocketrt::Error::InvalidArgument(_))));
}

#[test]
fn attention_with_a_wide_gqa_group_and_odd_vec4_count_matches_reference() {
    // 8 q heads per KV head, head_dim 12 (3 vec4s per head), one split and 4 splits.
    let shape = HeadShape {
        n_heads: 16,
        n_kv_heads: 2,
        head_dim: 12,
        context: 40,
    };
    check_attention(shape, true, 9, 64, 60);
    check_attention(shape, false, 39, 10, 61);
    // 10 q heads per KV head: the one-split lanes kernel spreads a group over two
    // workgroups of 8 lanes.
    check_attention(heads(20, 2, 16, 30), true, 17, 64, 62);
    check_attention(heads(20, 2, 16, 30), true, 29, 8, 63);
}

/// The group design's layouts (workgroups of 256, 128 and 64 invocations as the group and
/// head_dim grow, chunks of twice that many positions), at GQA 1:1, 7:1 and 16:1 with
/// heads of 64 and 128, one split and several, splits of several chunks; 7:1 with heads
/// of 128 (Qwen3's) in two splits in every design. The long twin runs every case in every
/// design.
#[test]
fn attention_matches_reference_for_gqa_1_to_1_7_to_1_and_16_to_1_with_heads_of_64_and_128() {
    gqa_layouts(false);
}

#[test]
#[ignore = "long tier: every GQA layout case in every design"]
fn attention_matches_reference_for_gqa_1_to_1_7_to_1_and_16_to_1_in_every_design_long() {
    gqa_layouts(true);
}

/// The cases of the GQA layout tests: each in the group design, or (`every_design`, and
/// always for 7:1 at heads of 128 in two splits) in every design.
fn gqa_layouts(every_design: bool) {
    use pocketrt::gpu::kernels::attention_group::GroupLayout;
    let width = |shape| GroupLayout::of(shape).map(|l| l.width);
    let check = |shape, qk_norm, pos, split_len, seed, every: bool| {
        if every || every_design {
            check_attention(shape, qk_norm, pos, split_len, seed);
        } else {
            let group = Design::Plain(AttentionVariant::Group);
            check_attention_design(gpu(), shape, qk_norm, pos, split_len, seed, group);
        }
    };
    // 1:1, heads of 128: 256 invocations; one split, three, and one split of 600
    // positions in two chunks (512 + 88).
    let mha = heads(4, 4, 128, 700);
    assert_eq!(width(mha), Some(256));
    check(mha, true, 200, 256, 70, false);
    if every_design {
        check(mha, false, 599, 256, 71, false);
    }
    check(mha, true, 599, 4096, 72, false);
    // 7:1 (Pocket's ratio), heads of 128: 128 invocations, chunks of 256.
    let qwen = heads(14, 2, 128, 1100);
    assert_eq!(width(qwen), Some(128));
    check(qwen, true, 255, 256, 73, false);
    check(qwen, true, 256, 256, 74, true);
    check(qwen, false, 1099, 256, 75, false);
    check(qwen, true, 1099, 1024, 76, false);
    assert_eq!(width(POCKET_HEADS), Some(128));
    // 16:1, heads of 64: 64 invocations, chunks of 128 (a 256-position split is 2).
    let wide = heads(16, 1, 64, 600);
    assert_eq!(width(wide), Some(64));
    check(wide, true, 100, 256, 77, false);
    check(wide, true, 599, 256, 78, false);
}
