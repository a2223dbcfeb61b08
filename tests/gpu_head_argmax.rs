//! The LM head GEMV's fused argmax (the GPU design's `Epilogue::StoreArgmax`: each
//! workgroup's best row into partials, gemv_q4_rows_gpu_argmax.wgsl) and its reduction
//! (argmax_partials.wgsl) against a CPU argmax over the logits the same kernel stored
//! (exact: largest value, the lowest index on ties, NaN never, only allowed tokens under
//! the mask), and the stored logits against the plain store GEMV's (bit for bit). Edge
//! shapes: N not a multiple of a workgroup's rows, N = 65,536 and 151,936, a layout of
//! one row per workgroup (a 2-D grid), ties inside a workgroup and across workgroups, a
//! mask allowing some tokens, one token, none, and the flag off over garbage bits; a Q8
//! head bound in parts, one GEMV each, their partials reduced together.

mod gpu_common;

use gpu_common::{gpu, mask_buffer, Rng};
use pocketrt::gpu::code_texture::MatrixCodes;
use pocketrt::gpu::kernels::argmax_partials::ArgmaxPartials;
use pocketrt::gpu::kernels::common::gemv::{GemvQ4, HeadArgmax};
use pocketrt::gpu::kernels::common::gemv_spec::{
    Epilogue, GemvSpec, GemvVariant, GpuRows, SlotReduce,
};
use pocketrt::gpu::kernels::{grid, run, MatrixFormat};
use pocketrt::gpu::weights::MatrixBuffers;
use pocketrt::quant::{Q4Tensor, Q8Tensor};

const K: usize = 64;

/// The profiles' GPU layout, one whose rows (6) divide none of the sizes, one row per
/// workgroup (a 2-D grid past 65,535 rows), both with x staged per workgroup and the
/// one-barrier reduction, and subgroup slots where the device has them.
fn layouts() -> Vec<GpuRows> {
    let tree = GpuRows {
        tpr: 16,
        slots: 8,
        rps: 2,
        reduce: SlotReduce::Tree,
        f16: false,
        x_shared: false,
    };
    let mut out = vec![
        tree,
        GpuRows {
            tpr: 4,
            slots: 2,
            rps: 3,
            ..tree
        },
        GpuRows {
            tpr: 64,
            slots: 1,
            rps: 1,
            ..tree
        },
    ];
    // x staged per workgroup with the one-barrier reduction (K 64 fits).
    let staged = GpuRows {
        reduce: SlotReduce::OneBarrier,
        x_shared: true,
        ..tree
    };
    out.extend([
        staged,
        GpuRows {
            tpr: 4,
            slots: 2,
            rps: 3,
            ..staged
        },
    ]);
    if let Some(width) = gpu().profile.subgroup_size {
        out.push(GpuRows {
            tpr: width,
            slots: 128 / width,
            rps: 5,
            reduce: SlotReduce::Subgroup,
            f16: false,
            x_shared: false,
        });
    }
    out
}

/// A random `n` × K matrix where row `best`'s values (5× the others') are copied to
/// every row of `ties`: equal codes, so bit-equal logits at the top.
fn matrix(n: usize, best: usize, ties: &[usize], seed: u64) -> Q4Tensor {
    let mut rng = Rng::new(seed);
    let mut w = rng.vec(n * K, 1.0);
    let top: Vec<f32> = w[best * K..(best + 1) * K]
        .iter()
        .map(|v| v * 5.0)
        .collect();
    for &r in ties.iter().chain([&best]) {
        w[r * K..(r + 1) * K].copy_from_slice(&top);
    }
    Q4Tensor::quantize(&w, n, K).unwrap()
}

/// (fused argmax (index, value bits), its stored logits, the plain GEMV's logits).
fn run_head(g: GpuRows, w: &Q4Tensor, x: &[f32], mask: &[u32]) -> ((u32, u32), Vec<f32>, Vec<f32>) {
    let ctx = gpu();
    let n = w.rows;
    let fused = GemvQ4::new(
        ctx,
        GemvVariant::GpuRows(g),
        GemvSpec::new(n, K, Epilogue::StoreArgmax),
    )
    .unwrap();
    let plain = GemvQ4::new(
        ctx,
        GemvVariant::GpuRows(g),
        GemvSpec::new(n, K, Epilogue::Store),
    )
    .unwrap();
    let qparams = ctx.storage_init("qparams", &w.qparams).unwrap();
    let codes = MatrixCodes::upload(ctx, fused.codes_read(), &w.codes, &qparams).unwrap();
    let xb = ctx.storage_init("x", x).unwrap();
    let none = ctx.storage("none", 4).unwrap();
    let (out, out_plain) = (
        ctx.storage("out", 4 * n as u64).unwrap(),
        ctx.storage("out plain", 4 * n as u64).unwrap(),
    );
    let mb = ctx.storage_init("mask", mask).unwrap();
    let groups = fused.workgroups();
    let partials = ctx
        .storage("partials", ArgmaxPartials::partials_bytes(groups))
        .unwrap();
    let result = ctx.storage("result", 8).unwrap();
    let buffers = HeadArgmax {
        mask: &mb,
        partials: &partials,
    };
    let head = fused.dispatch_argmax(ctx, codes.bind(), &qparams, &xb, None, &none, &out, buffers);
    let reduce = ArgmaxPartials::new(ctx, groups).dispatch(ctx, &partials, &result);
    let alone = plain.dispatch(ctx, codes.bind(), &qparams, &xb, None, &none, &out_plain);
    run(ctx, &[&head, &reduce, &alone]);
    let r = ctx.read_u32(&result, 2).unwrap();
    (
        (r[0], r[1]),
        ctx.read_f32(&out, n).unwrap(),
        ctx.read_f32(&out_plain, n).unwrap(),
    )
}

/// The argmax the CPU takes of `logits` under `mask`'s layout: (index, value bits);
/// (0, bits of -3.4e38) when no token may win (argmax.wgsl's answer).
fn cpu_argmax(logits: &[f32], mask: &[u32]) -> (u32, u32) {
    let allowed = |i: usize| mask[0] == 0 || (mask[1 + i / 32] >> (i % 32)) & 1 != 0;
    let mut best: Option<usize> = None;
    for (i, &v) in logits.iter().enumerate() {
        if allowed(i) && !v.is_nan() && best.is_none_or(|b| v > logits[b]) {
            best = Some(i);
        }
    }
    match best {
        Some(i) => (i as u32, logits[i].to_bits()),
        None => (0, (-3.4e38f32).to_bits()),
    }
}

fn check(what: &str, n: usize, best: usize, ties: &[usize], masks: &[Vec<u32>], seed: u64) {
    check_layouts(what, &layouts(), n, best, ties, masks, seed);
}

fn check_layouts(
    what: &str,
    layouts: &[GpuRows],
    n: usize,
    best: usize,
    ties: &[usize],
    masks: &[Vec<u32>],
    seed: u64,
) {
    let w = matrix(n, best, ties, seed);
    let x = Rng::new(seed + 1).vec(K, 1.0);
    for &g in layouts {
        let groups = n.div_ceil(g.rows() as usize) as u32;
        let rows = grid(groups);
        println!("{what} {g:?}: grid {rows:?}");
        for (m, mask) in masks.iter().enumerate() {
            let (got, logits, plain) = run_head(g, &w, &x, mask);
            let case = format!("{what} {g:?} mask {m}");
            let same = logits
                .iter()
                .zip(&plain)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{case}: the fused head stores the plain head's logits"
            );
            assert_eq!(got, cpu_argmax(&logits, mask), "{case}");
        }
    }
}

#[test]
fn fused_head_argmax_equals_the_cpu_argmax_with_ties_and_masks() {
    let n = 1000;
    // Ties: in the same workgroup as the best (999 is in the last, partial one), in others.
    let ties = [7, 350, 998, 999];
    let masks = vec![
        mask_buffer(n, None),
        mask_buffer(n, Some(&|i| i % 3 == 1)),
        mask_buffer(n, Some(&|i| i == 998 || i == 999)),
        mask_buffer(n, Some(&|i| i == 2)),
        mask_buffer(n, Some(&|_| false)),
    ];
    check("1000 rows", n, 350, &ties, &masks, 3);
    // No ties: the best alone, anywhere.
    check("1000 rows, one best", n, 0, &[], &masks[..2], 4);
}

/// Vocabulary sizes in the profiles' layout and one row per workgroup (151,936: a 2-D
/// grid), unmasked (Pocket's 65,536) and masked (Qwen's 151,936).
#[test]
fn fused_head_argmax_on_vocabulary_sizes() {
    let all = layouts();
    let layouts = [all[0], all[2]];
    let masks = [mask_buffer(65_536, None)];
    check_layouts("65536 rows", &layouts, 65_536, 40_000, &[65_535], &masks, 5);
    let n = 151_936;
    let masks = [mask_buffer(n, Some(&|i| i % 5 == 2))];
    check_layouts(
        "151936 rows",
        &layouts,
        n,
        151_932,
        &[12, 151_927],
        &masks,
        6,
    );
}

#[test]
fn the_fused_argmax_needs_the_gpu_design() {
    let spec = GemvSpec::new(64, K, Epilogue::StoreArgmax);
    let err = GemvQ4::new(gpu(), GemvVariant::RowsFromTiles, spec)
        .err()
        .unwrap();
    assert!(err.to_string().contains("fused argmax"), "{err}");
}

/// A Q8 head bound in parts (as one whose codes exceed a storage binding:
/// `MatrixBuffers::parts`, here with a binding of 4,096 rows): one fused GEMV per part,
/// their partials reduced together, equal the CPU argmax over the whole head's logits,
/// which equal the plain whole-matrix GEMV's bit for bit; ties across parts go to the
/// lowest index, masks see global indices.
#[test]
fn a_head_in_parts_fuses_one_argmax_across_them() {
    let ctx = gpu();
    let n = 2 * 4096 + 300;
    let (best, ties) = (4100, [8400]);
    let mut rng = Rng::new(9);
    let mut w = rng.vec(n * K, 1.0);
    let top: Vec<f32> = w[best * K..][..K].iter().map(|v| v * 5.0).collect();
    for r in ties.into_iter().chain([best]) {
        w[r * K..][..K].copy_from_slice(&top);
    }
    let q = Q8Tensor::quantize(&w, n, K).unwrap();
    let head = MatrixBuffers {
        codes: ctx.storage_init("codes", &q.codes).unwrap(),
        qparams: ctx.storage_init("scales", &q.scales).unwrap(),
        rows: n,
        cols: K,
        format: MatrixFormat::Q8,
    };
    let parts = head.parts(4096 * K as u64).unwrap();
    let starts: Vec<usize> = parts.iter().map(|p| p.rows.start).collect();
    assert_eq!(starts, [0, 4096, 8192]);
    let g = layouts()[0];
    let q8 = |n, epilogue, row0| GemvSpec {
        format: MatrixFormat::Q8,
        row0,
        ..GemvSpec::new(n, K, epilogue)
    };
    let design = GemvVariant::GpuRows(g);
    let plain = GemvQ4::new(ctx, design, q8(n, Epilogue::Store, 0)).unwrap();
    let x = Rng::new(10).vec(K, 1.0);
    let xb = ctx.storage_init("x", &x).unwrap();
    let out_plain = ctx.storage("out plain", 4 * n as u64).unwrap();
    let codes = pocketrt::gpu::kernels::common::q4_codes::Codes::Buffer(&head.codes);
    let alone = plain.dispatch(ctx, codes, &head.qparams, &xb, None, &xb, &out_plain);
    run(ctx, &[&alone]);
    let plain = ctx.read_f32(&out_plain, n).unwrap();
    let masks = [
        mask_buffer(n, None),
        mask_buffer(n, Some(&|i| i >= 8192 || i % 7 == 3)),
    ];
    for (m, mask) in masks.iter().enumerate() {
        let kernels: Vec<GemvQ4> = parts
            .iter()
            .map(|p| {
                let spec = q8(p.rows.len(), Epilogue::StoreArgmax, p.rows.start);
                GemvQ4::new(ctx, design, spec).unwrap()
            })
            .collect();
        let groups = kernels.iter().map(GemvQ4::workgroups).sum();
        let partials = ctx
            .storage("partials", ArgmaxPartials::partials_bytes(groups))
            .unwrap();
        let (mb, out) = (
            ctx.storage_init("mask", mask).unwrap(),
            ctx.storage("out", 4 * n as u64).unwrap(),
        );
        let result = ctx.storage("result", 8).unwrap();
        let fused = HeadArgmax {
            mask: &mb,
            partials: &partials,
        };
        let mut d: Vec<_> = kernels
            .iter()
            .zip(&parts)
            .map(|(k, p)| k.dispatch_part(ctx, p, &xb, None, &out, Some(fused)))
            .collect();
        d.push(ArgmaxPartials::new(ctx, groups).dispatch(ctx, &partials, &result));
        run(ctx, &d.iter().collect::<Vec<_>>());
        let logits = ctx.read_f32(&out, n).unwrap();
        let same = logits
            .iter()
            .zip(&plain)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "mask {m}: the parts store the whole head's logits");
        let r = ctx.read_u32(&result, 2).unwrap();
        let want = cpu_argmax(&logits, mask);
        assert_eq!((r[0], r[1]), want, "mask {m}");
        println!("mask {m}: argmax {} across {} parts", r[0], parts.len());
    }
}
