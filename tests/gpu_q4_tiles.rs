//! The CPU adapters' tile-order repack of the Q4 codes (`soft::q4_tiles`, shaders/soft/q4_tile.wgsl,
//! read by the `tiles` GEMV of tests/gpu_gemv.rs): every texel where the layout says,
//! every code texel and every group's qparams of every row held.

mod gpu_common;

use gpu_common::{gpu, Rng};
use pocketrt::gpu::kernels::common::gemv_spec::{Epilogue, GemvSpec, RowsLayout};

/// The tile repack (shaders/soft/q4_tile.wgsl) puts every texel where `TileLayout::texel` says,
/// and the tile order holds every code texel and every group's qparams of every row.
#[test]
fn q4_tile_repack_places_every_texel_as_the_layout_says() {
    use pocketrt::gpu::kernels::common::q4_tiles::{TileLayout, TileTexel};
    use pocketrt::gpu::kernels::soft::q4_tiles::TileRepack;
    use std::collections::HashSet;
    let ctx = gpu();
    let mut rng = Rng::new(77);
    for (n, k, epilogue, layout) in [
        (70, 1280, Epilogue::SwiGlu, RowsLayout::default_for(2)),
        (129, 896, Epilogue::Store, RowsLayout::default_for(1)),
        (20, 192, Epilogue::AddInto, RowsLayout { wg: 8, rows: 3 }),
    ] {
        let tile = TileLayout::new(&GemvSpec::new(n, k, epilogue), layout);
        let rows = n * epilogue.parts();
        let codes: Vec<u32> = (0..rows * k / 8).map(|_| rng.next_u64() as u32).collect();
        let qparams: Vec<u32> = (0..rows * k / 64).map(|_| rng.next_u64() as u32).collect();
        let cb = ctx.storage_init("codes", &codes).unwrap();
        let qb = ctx.storage_init("qparams", &qparams).unwrap();
        let got = ctx
            .read_u32(
                &TileRepack::new(ctx, tile).repack(ctx, &cb, &qb).unwrap(),
                4 * tile.texels(),
            )
            .unwrap();
        let (mut code_seen, mut qp_seen) = (HashSet::new(), HashSet::new());
        for t in 0..tile.texels() {
            let want: Vec<u32> = match tile.texel(t) {
                TileTexel::Codes { row, texel } => {
                    code_seen.insert((row, texel));
                    codes[row * k / 8 + 4 * texel..][..4].to_vec()
                }
                TileTexel::Qparams { row, first } => (0..4)
                    .map(|j| match j < tile.qpt {
                        true => {
                            qp_seen.insert((row, first + j));
                            qparams[row * k / 64 + first + j]
                        }
                        false => 0,
                    })
                    .collect(),
            };
            assert_eq!(&got[4 * t..4 * t + 4], &want[..], "{tile:?}: texel {t}");
        }
        assert_eq!(code_seen.len(), rows * k / 32, "{tile:?}: every code texel");
        assert_eq!(
            qp_seen.len(),
            rows * k / 64,
            "{tile:?}: every group's qparams"
        );
    }
}
