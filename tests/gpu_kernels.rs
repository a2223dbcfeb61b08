//! RMSNorm, embedding gathers (decode and prefill; Q4 g64 and Q8 g32 tables) and argmax
//! kernels against CPU references.

mod gpu_common;

use gpu_common::{assert_close, chunk_uniform, gpu, mask_buffer, rmsnorm, Rng};
use pocketrt::gpu::kernels::argmax::Argmax;
use pocketrt::gpu::kernels::embed_prefill::EmbedPrefill;
use pocketrt::gpu::kernels::embed_q4::{
    split_of, table_bindings, whole_table, EmbedQ4, TOKEN_ON_GPU,
};
use pocketrt::gpu::kernels::rmsnorm::RmsNorm;
use pocketrt::gpu::kernels::{grid, run, MatrixFormat};
use pocketrt::gpu::weights::MatrixBuffers;
use pocketrt::gpu::StepUniform;
use pocketrt::quant::{Q4Tensor, Q8Tensor, QMatrix};

/// A random `vocab` × `k` table in `format`, and its buffers (codes, qparams or scales).
fn table(
    format: MatrixFormat,
    (vocab, k): (usize, usize),
    seed: u64,
) -> (QMatrix, wgpu::Buffer, wgpu::Buffer) {
    let ctx = gpu();
    let values = Rng::new(seed).vec(vocab * k, 2.0);
    let (t, codes, params) = match format {
        MatrixFormat::Q4 => {
            let q = Q4Tensor::quantize(&values, vocab, k).unwrap();
            let (c, p) = (q.codes.clone(), q.qparams.clone());
            (QMatrix::Q4(q), c, p)
        }
        MatrixFormat::Q8 => {
            let q = Q8Tensor::quantize(&values, vocab, k).unwrap();
            let (c, p) = (q.codes.clone(), q.scales.clone());
            (QMatrix::Q8(q), c, p)
        }
    };
    let codes = ctx.storage_init("codes", &codes).unwrap();
    let params = ctx.storage_init("qparams", &params).unwrap();
    (t, codes, params)
}

const FORMATS: [MatrixFormat; 2] = [MatrixFormat::Q4, MatrixFormat::Q8];

/// Tolerance for f32 paths: 1e-5 · max|ref| + 1e-6 (the GPU rounds each value once or
/// twice; a wrong element or scale is off by far more).
const REL: f32 = 1e-5;
const ABS: f32 = 1e-6;

#[test]
fn rmsnorm_matches_reference_for_several_widths() {
    let ctx = gpu();
    for (k, seed) in [(896usize, 1u64), (64, 2), (1000, 3), (5, 4)] {
        let mut rng = Rng::new(seed);
        let x = rng.vec(k, 3.0);
        let w = rng.vec(k, 1.5);
        let kernel = RmsNorm::new(ctx, k, 1e-6);
        let xb = ctx.storage_init("x", &x).unwrap();
        let wb = ctx.storage_init("w", &w).unwrap();
        let out = ctx.storage("out", 4 * k as u64).unwrap();
        run(ctx, &[&kernel.dispatch(ctx, &xb, &wb, &out)]);
        let got = ctx.read_f32(&out, k).unwrap();
        assert_close(
            &format!("rmsnorm k={k}"),
            &got,
            &rmsnorm(&x, &w, 1e-6),
            REL,
            ABS,
        );
    }
}

#[test]
fn embedding_gather_returns_the_dequantized_row_of_the_step_token() {
    for format in FORMATS {
        embedding_gather_returns_the_dequantized_row_in(format);
    }
}

fn embedding_gather_returns_the_dequantized_row_in(format: MatrixFormat) {
    let ctx = gpu();
    let (vocab, k) = (1000usize, 192usize);
    let (table, codes, qparams) = table(format, (vocab, k), 11);
    let kernel = EmbedQ4::new(ctx, vocab, k, format, None).unwrap();
    let step = ctx.uniform("step", 16);
    let out = ctx.storage("out", 4 * k as u64).unwrap();
    // The previous step's argmax (index, value bits), read when the step's token is
    // TOKEN_ON_GPU: a token inside the vocabulary, or one outside it (row 0).
    let prev = ctx.storage_init("prev", &[733u32, 0]).unwrap();
    let prev_bad = ctx.storage_init("prev bad", &[u32::MAX, 0]).unwrap();
    let d = kernel.dispatch(ctx, &step, whole_table(&codes, &qparams), &out, &prev);
    let d_bad = kernel.dispatch(ctx, &step, whole_table(&codes, &qparams), &out, &prev_bad);
    let cases = [
        (0u32, 0, &d),
        (1, 1, &d),
        (517, 517, &d),
        (999, 999, &d),
        (TOKEN_ON_GPU, 733, &d),
        (TOKEN_ON_GPU, 0, &d_bad),
    ];
    for (token, row, d) in cases {
        let s = StepUniform {
            token,
            ..Default::default()
        };
        ctx.queue.write_buffer(&step, 0, bytemuck::bytes_of(&s));
        run(ctx, &[d]);
        let mut want = vec![0f32; k];
        table.dequantize_row(row as usize, &mut want);
        let got = ctx.read_f32(&out, k).unwrap();
        assert_close(
            &format!("embed {format:?} token {token} row {row}"),
            &got,
            &want,
            1e-6,
            0.0,
        );
    }
}

#[test]
fn prefill_embedding_gather_returns_the_chunk_tokens_rows() {
    let ctx = gpu();
    let (vocab, k) = (300usize, 128usize);
    let tokens = [5u32, 0, 299, 5, 17, 200, 1];
    for format in FORMATS {
        let (t, codes, qparams) = table(format, (vocab, k), 12);
        let kernel = EmbedPrefill::new(ctx, k, format, None);
        let count = tokens.len();
        let chunk = chunk_uniform(count);
        let tb = ctx.storage_init("tokens", &tokens).unwrap();
        // One row more than the chunk's: the gather must leave it alone.
        let out = ctx
            .storage_init("out", &vec![7f32; (count + 1) * k])
            .unwrap();
        let table = whole_table(&codes, &qparams);
        let d = kernel.dispatch(ctx, (&chunk, &tb), table, &out, count + 1);
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            d.encode_grid(&mut pass, grid(kernel.workgroups(count)));
        }
        ctx.queue.submit([enc.finish()]);
        let mut want = vec![0f32; (count + 1) * k];
        for (id, row) in tokens.iter().zip(want.chunks_exact_mut(k)) {
            t.dequantize_row(*id as usize, row);
        }
        want[count * k..].fill(7.0);
        let got = ctx.read_f32(&out, (count + 1) * k).unwrap();
        assert_close(&format!("prefill embed {format:?}"), &got, &want, 1e-6, 0.0);
    }
}

fn gpu_argmax(logits: &[f32]) -> (u32, f32) {
    gpu_argmax_masked(logits, None)
}

/// Argmax under the allowed-token mask `allowed` (`None`: the flag off, the bits garbage).
fn gpu_argmax_masked(logits: &[f32], allowed: Option<&dyn Fn(usize) -> bool>) -> (u32, f32) {
    let ctx = gpu();
    let n = logits.len();
    let kernel = Argmax::new(ctx, n);
    let lb = ctx.storage_init("logits", logits).unwrap();
    let rb = ctx.storage("result", 8).unwrap();
    let mb = ctx.storage_init("mask", &mask_buffer(n, allowed)).unwrap();
    run(ctx, &[&kernel.dispatch(ctx, &lb, &rb, &mb)]);
    let r = ctx.read_u32(&rb, 2).unwrap();
    (r[0], f32::from_bits(r[1]))
}

/// The first index of the maximum (what greedy decoding on the CPU picks).
fn cpu_argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best as u32
}

#[test]
fn argmax_finds_the_first_maximum_in_random_and_edge_cases() {
    let mut rng = Rng::new(21);
    let logits = rng.vec(151_936, 10.0);
    assert_eq!(gpu_argmax(&logits).0, cpu_argmax(&logits));
    let logits = rng.vec(65_536, 10.0);
    let (i, v) = gpu_argmax(&logits);
    assert_eq!((i, v), (cpu_argmax(&logits), logits[i as usize]));
    // Ties go to the lowest index; the maximum at either end is found.
    let mut tie = vec![0f32; 1000];
    tie[700] = 5.0;
    tie[300] = 5.0;
    assert_eq!(gpu_argmax(&tie).0, 300);
    let mut last = vec![-1f32; 777];
    last[776] = 0.0;
    assert_eq!(gpu_argmax(&last).0, 776);
    assert_eq!(gpu_argmax(&[3.0]).0, 0);
    // NaN never wins.
    let mut nan = vec![1f32; 300];
    nan[5] = f32::NAN;
    nan[200] = 2.0;
    assert_eq!(gpu_argmax(&nan).0, 200);
}

#[test]
fn a_buffer_beyond_the_device_limits_is_a_typed_error() {
    match gpu().storage("huge", 1 << 40) {
        Err(pocketrt::Error::ExceedsDeviceLimits { needed, .. }) => assert_eq!(needed, 1 << 40),
        other => panic!("expected ExceedsDeviceLimits, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn read_bench_partial_sums_add_up_to_the_buffer_sum_in_both_layouts() {
    use pocketrt::gpu::kernels::read_bench::{ReadBench, ReadLayout};
    let ctx = gpu();
    let len = 16 * 64 * 4 * 3;
    // Small integers: every f32 sum is exact, so any skipped or doubled load shows.
    let data: Vec<f32> = (0..len).map(|i| (i % 7) as f32).collect();
    let want: f32 = data.iter().sum();
    let buf = ctx.storage_init("data", &data).unwrap();
    for layout in [ReadLayout::Interleaved, ReadLayout::Chunked] {
        let k = ReadBench::new(ctx, len, 4, layout).unwrap();
        let out = ctx.storage("out", 4 * k.partials() as u64).unwrap();
        run(ctx, &[&k.dispatch(ctx, &buf, &out)]);
        let got: f32 = ctx.read_f32(&out, k.partials()).unwrap().iter().sum();
        assert_eq!(got, want, "{layout:?}");
    }
    assert!(ReadBench::new(ctx, len + 4, 4, ReadLayout::Chunked).is_err());
}

/// Masked argmax = the CPU's first maximum among the allowed logits: random masks, all
/// but one masked, the tail word only, vocabularies not a multiple of 32; the flag off
/// ignores the bits.
#[test]
fn masked_argmax_picks_the_best_allowed_token() {
    let mut rng = Rng::new(23);
    for n in [151_936, 1000, 321, 33, 31, 1] {
        let logits = rng.vec(n, 10.0);
        let keep: Vec<bool> = (0..n).map(|_| rng.uniform() < -0.8).collect();
        let one = n / 3;
        let tail = (n - n % 32).min(n - 1);
        let masks: [(&str, &dyn Fn(usize) -> bool); 3] = [
            ("random 10%", &|i| keep[i] || i == 0),
            ("all but one", &|i| i == one),
            ("tail word only", &|i| i >= tail),
        ];
        for (what, allowed) in masks {
            let kept: Vec<f32> = (0..n)
                .map(|i| if allowed(i) { logits[i] } else { f32::MIN })
                .collect();
            let want = cpu_argmax(&kept);
            assert!(allowed(want as usize));
            let (i, v) = gpu_argmax_masked(&logits, Some(allowed));
            assert_eq!((i, v), (want, logits[want as usize]), "{what} (n = {n})");
        }
        assert_eq!(
            gpu_argmax_masked(&logits, None).0,
            cpu_argmax(&logits),
            "flag off (n = {n})"
        );
    }
}

/// A table bound in two parts (as one whose codes exceed a storage binding:
/// `MatrixBuffers::parts`, here with a binding of 4,096 rows): both gathers read rows on
/// either side of the split, the decode gather also the token on the GPU.
#[test]
fn embedding_gathers_read_a_table_bound_in_two_parts() {
    let ctx = gpu();
    let (vocab, k) = (4096 + 300, 64);
    for format in FORMATS {
        let (t, codes, qparams) = table(format, (vocab, k), 13);
        let m = MatrixBuffers {
            codes,
            qparams,
            rows: vocab,
            cols: k,
            format,
        };
        let parts = m.parts(4096 * format.code_bytes(1, k)).unwrap();
        let split = split_of(&parts).unwrap();
        assert_eq!(split, Some(4096));
        let step = ctx.uniform("step", 16);
        let out = ctx.storage("out", 4 * k as u64).unwrap();
        let prev = ctx.storage_init("prev", &[4097u32, 0]).unwrap();
        let kernel = EmbedQ4::new(ctx, vocab, k, format, split).unwrap();
        let d = kernel.dispatch(ctx, &step, table_bindings(&parts), &out, &prev);
        for (token, row) in [(0u32, 0), (4095, 4095), (4096, 4096), (4395, 4395)]
            .into_iter()
            .chain([(TOKEN_ON_GPU, 4097)])
        {
            let s = StepUniform {
                token,
                ..Default::default()
            };
            ctx.queue.write_buffer(&step, 0, bytemuck::bytes_of(&s));
            run(ctx, &[&d]);
            let mut want = vec![0f32; k];
            t.dequantize_row(row, &mut want);
            let got = ctx.read_f32(&out, k).unwrap();
            assert_close(
                &format!("{format:?} split row {row}"),
                &got,
                &want,
                1e-6,
                0.0,
            );
        }
        let tokens = [4095u32, 4096, 3, 4395];
        let kernel = EmbedPrefill::new(ctx, k, format, split);
        let chunk = chunk_uniform(tokens.len());
        let tb = ctx.storage_init("tokens", &tokens).unwrap();
        let out = ctx.storage("out", (4 * tokens.len() * k) as u64).unwrap();
        let d = kernel.dispatch(
            ctx,
            (&chunk, &tb),
            table_bindings(&parts),
            &out,
            tokens.len(),
        );
        run(ctx, &[&d]);
        let mut want = vec![0f32; tokens.len() * k];
        for (t_id, row) in tokens.iter().zip(want.chunks_exact_mut(k)) {
            t.dequantize_row(*t_id as usize, row);
        }
        let got = ctx.read_f32(&out, tokens.len() * k).unwrap();
        assert_close(&format!("{format:?} split prefill"), &got, &want, 1e-6, 0.0);
    }
}
