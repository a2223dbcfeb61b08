//! GPU top-k (topk.wgsl, a radix select in two passes) against a CPU sort: the 64 best
//! (index, logit) pairs, best first, ties to the lower index, NaN never chosen, fewer
//! than 64 values handled; vocabulary sizes, chunk and lane boundaries, ties at every
//! digit of the key and of the index, signs, zeros and infinities.

mod gpu_common;

use gpu_common::{gpu, Rng};
use pocketrt::gpu::kernels::run;
use pocketrt::gpu::kernels::topk::{parse_result, TopK, TOPK_MAX};

fn gpu_topk(logits: &[f32]) -> Vec<(u32, f32)> {
    let ctx = gpu();
    let kernel = TopK::new(ctx, logits.len());
    let lb = ctx.storage_init("logits", logits).unwrap();
    let scratch = ctx.storage("scratch", TopK::scratch_bytes()).unwrap();
    let rb = ctx.storage("result", TopK::result_bytes()).unwrap();
    let [a, b] = kernel.dispatch(ctx, &lb, &scratch, &rb);
    run(ctx, &[&a, &b]);
    parse_result(&ctx.read_buffer(&rb, TopK::result_bytes()).unwrap())
}

/// The reference: stable sort by value descending (ties keep index order, -0 ties +0),
/// NaN dropped.
fn cpu_topk(logits: &[f32]) -> Vec<(u32, f32)> {
    let mut all: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_nan())
        .map(|(i, &v)| (i as u32, v))
        .collect();
    all.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
    all.truncate(TOPK_MAX);
    all
}

/// The GPU's result equals the CPU sort's, bit for bit (the values are the inputs').
fn check(what: &str, logits: &[f32]) -> Vec<(u32, f32)> {
    let got = gpu_topk(logits);
    let bits = |v: &[(u32, f32)]| -> Vec<(u32, u32)> {
        v.iter().map(|&(i, x)| (i, x.to_bits())).collect()
    };
    let want = cpu_topk(logits);
    assert_eq!(bits(&got), bits(&want), "{what} (n = {})", logits.len());
    got
}

#[test]
fn topk_equals_a_cpu_sort_on_vocabulary_sized_logits() {
    let mut rng = Rng::new(5);
    // The uniform draws lie on a 2^-23 grid: 151,936 of them hold hundreds of equal pairs.
    for n in [151_936, 65_536, 262_144, 151_937, 1000] {
        let logits = rng.vec(n, 12.0);
        let got = check("uniform", &logits);
        assert_eq!(got.len(), TOPK_MAX, "n = {n}");
    }
    // All negative, and large magnitudes of both signs.
    let negative: Vec<f32> = rng
        .vec(65_536, 1.0)
        .iter()
        .map(|v| -v.abs() - 3.0)
        .collect();
    check("negative", &negative);
    let wide: Vec<f32> = (0..151_936)
        .map(|_| rng.uniform() * 10f32.powi((rng.uniform() * 38.0) as i32))
        .collect();
    check("wide", &wide);
}

#[test]
fn topk_handles_sizes_that_are_not_multiples_of_the_workgroup() {
    let mut rng = Rng::new(11);
    for n in [1, 2, 5, 63, 64, 65, 255, 256, 257, 4097, 12_345, 99_999] {
        check("small or odd", &rng.vec(n, 4.0));
    }
    assert_eq!(gpu_topk(&[-2.5]), vec![(0, -2.5)]);
}

#[test]
fn topk_breaks_ties_by_index_skips_nan_and_handles_short_inputs() {
    // 300 equal values: the 64 lowest indices, in order.
    let flat = vec![1.5f32; 300];
    let got = check("flat", &flat);
    assert_eq!(got.last().unwrap().0, 63);
    // A few values (fewer than K) and NaNs: only the real ones come back.
    let mut short = vec![f32::NAN; 40];
    for (i, v) in [(3usize, 2.0f32), (17, -1.0), (39, 7.0), (0, -3e30)] {
        short[i] = v;
    }
    assert_eq!(
        gpu_topk(&short),
        vec![(39, 7.0), (3, 2.0), (17, -1.0), (0, -3e30)]
    );
    // Maxima in the last lane positions and at the end.
    let mut edge = vec![0f32; 777];
    edge[776] = 9.0;
    edge[255] = 8.0;
    edge[256] = 8.0;
    let got = check("edge", &edge);
    assert_eq!(&got[..3], &[(776, 9.0), (255, 8.0), (256, 8.0)]);
}

#[test]
fn topk_takes_the_lowest_indices_among_ties_at_the_64th_place() {
    let mut rng = Rng::new(23);
    let n = 151_936;
    // All equal, in every chunk: indices 0..63 (the select runs into the index digits).
    let got = check("all equal", &vec![-0.75f32; n]);
    assert!(got.iter().enumerate().all(|(i, &(j, _))| j == i as u32));
    // 40 above, 100 tied at the 64th place spread over the chunks, the rest below.
    let mut logits: Vec<f32> = rng.vec(n, 1.0);
    let spots = |rng: &mut Rng, k: usize| -> Vec<usize> {
        (0..k)
            .map(|_| (rng.next_u64() % n as u64) as usize)
            .collect()
    };
    for i in spots(&mut rng, 100) {
        logits[i] = 5.0;
    }
    for (k, i) in spots(&mut rng, 40).into_iter().enumerate() {
        logits[i] = 6.0 + k as f32;
    }
    let got = check("100 tied at the 64th place", &logits);
    assert_eq!(got[63].1, 5.0);
    // Keys that agree in all but the last digit, and indices that agree in all but one:
    // 256 values 1 + m·ulp, each held by hundreds of logits.
    let low: Vec<f32> = (0..n)
        .map(|_| f32::from_bits(0x3F80_0000 + (rng.next_u64() % 256) as u32))
        .collect();
    check("ties in the last digit", &low);
    // A tie run across a chunk boundary (chunks of 3,101 logits here) and a lane one.
    let mut boundary = vec![0f32; n];
    for v in &mut boundary[3_050..3_150] {
        *v = 2.0;
    }
    for v in &mut boundary[6_202 - 10..6_202 + 10] {
        *v = 3.0;
    }
    boundary[255] = 4.0;
    boundary[256] = 4.0;
    check("ties across a chunk boundary", &boundary);
    // +0 and -0 are equal: ties by index, each keeping its sign bit.
    let zeros: Vec<f32> = (0..1000)
        .map(|i| if i % 3 == 0 { -0.0 } else { 0.0 })
        .collect();
    check("signed zeros", &zeros);
}

#[test]
fn topk_keeps_infinities_and_drops_every_nan() {
    let n = 151_936;
    // NaN everywhere but 10 logits spread over the chunks (and NaNs of both signs and
    // any payload): only those 10, one of them -inf.
    let mut logits = vec![f32::NAN; n];
    for (k, v) in logits.iter_mut().enumerate().step_by(7) {
        *v = f32::from_bits(0x7FC0_0000 | (k as u32 & 0xFF) | ((k as u32 & 1) << 31));
    }
    let spots = [
        (0, 1.0),
        (1, -2.0),
        (3_100, f32::INFINITY),
        (3_101, 0.5),
        (40_000, -1e30),
        (77_777, 3.0),
        (100_001, f32::NEG_INFINITY),
        (151_000, 1e-40),
        (151_934, -0.0),
        (151_935, 7.0),
    ];
    for (i, v) in spots {
        logits[i] = v;
    }
    let got = check("10 finite or infinite among NaNs", &logits);
    assert_eq!(got.len(), 10);
    assert_eq!(got[0], (3_100, f32::INFINITY));
    assert_eq!(got[9], (100_001, f32::NEG_INFINITY));
    // All NaN: nothing.
    assert_eq!(gpu_topk(&vec![f32::NAN; 5000]), vec![]);
    // -inf but for a few: those, then -inf ties by index; and -inf alone.
    let mut masked = vec![f32::NEG_INFINITY; n];
    masked[90_000] = -5.0;
    masked[12] = f32::MAX;
    masked[150_000] = f32::MIN;
    let got = check("masked logits", &masked);
    assert_eq!(
        &got[..4],
        &[
            (12, f32::MAX),
            (90_000, -5.0),
            (150_000, f32::MIN),
            (0, f32::NEG_INFINITY)
        ]
    );
    check("all -inf", &vec![f32::NEG_INFINITY; 70_000]);
}
