//! GPU top-k (topk.wgsl, a radix select in two passes) against a CPU sort: the 64 best
//! (index, logit) pairs, best first, ties to the lower index, NaN never chosen, fewer
//! than 64 values handled; vocabulary sizes, chunk and lane boundaries, ties at every
//! digit of the key and of the index, signs, zeros and infinities. And the two kernels
//! around it in a sampled step: the sampler's logit adjustments before it
//! (logit_adjust.wgsl) and the normaliser after it (logsumexp.wgsl), against the formulas.

mod gpu_common;

use gpu_common::{gpu, mask_buffer, Rng};
use pocketrt::gpu::kernels::logit_adjust::{LogitAdjustKernel, INITIAL_ENTRIES};
use pocketrt::gpu::kernels::logsumexp::LogSumExp;
use pocketrt::gpu::kernels::run;
use pocketrt::gpu::kernels::topk::{parse_result, TopK, TOPK_MAX};
use pocketrt::sampler::LogitAdjust;

fn gpu_topk(logits: &[f32]) -> Vec<(u32, f32)> {
    gpu_topk_masked(logits, None)
}

fn gpu_topk_masked(logits: &[f32], allowed: Option<&dyn Fn(usize) -> bool>) -> Vec<(u32, f32)> {
    let ctx = gpu();
    let kernel = TopK::new(ctx, logits.len());
    let lb = ctx.storage_init("logits", logits).unwrap();
    let scratch = ctx.storage("scratch", TopK::scratch_bytes()).unwrap();
    let rb = ctx.storage("result", TopK::result_bytes()).unwrap();
    let mb = ctx
        .storage_init("mask", &mask_buffer(logits.len(), allowed))
        .unwrap();
    let [a, b] = kernel.dispatch(ctx, &lb, &scratch, &rb, &mb);
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

/// The logits after uploading and applying each list of `lists` in turn on the GPU.
fn gpu_adjusted(logits: &[f32], lists: &[Vec<LogitAdjust>]) -> Vec<f32> {
    let ctx = gpu();
    let lb = ctx.storage_init("logits", logits).unwrap();
    let mut kernel = LogitAdjustKernel::new(ctx, &lb, logits.len()).unwrap();
    for list in lists {
        let groups = kernel.upload(ctx, &lb, list).unwrap();
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        kernel.encode(&mut enc.begin_compute_pass(&Default::default()), groups);
        ctx.queue.submit([enc.finish()]);
    }
    let bytes = ctx.read_buffer(&lb, 4 * logits.len() as u64).unwrap();
    bytemuck::pod_collect_to_vec(&bytes)
}

/// `count` adjustments of distinct random tokens below `n`: biases, factors and
/// penalties of both signs (the reference formula is written out in the test).
fn random_list(rng: &mut Rng, n: usize, count: usize) -> Vec<LogitAdjust> {
    let mut tokens: Vec<u32> = (0..n as u32).collect();
    for i in 0..count {
        let j = i + (rng.next_u64() % (n - i) as u64) as usize;
        tokens.swap(i, j);
    }
    tokens[..count]
        .iter()
        .map(|&token| LogitAdjust {
            token,
            bias: rng.uniform() * 4.0,
            factor: 1.0 + rng.uniform().abs() * 2.0,
            penalty: rng.uniform(),
        })
        .collect()
}

#[test]
fn logit_adjust_rewrites_exactly_the_listed_logits() {
    let mut rng = Rng::new(31);
    let n = 5000;
    let logits = rng.vec(n, 3.0);
    // 1500 entries outgrow the first list; then 70 (two workgroups, the second padded),
    // which must not re-apply the stale tail of the longer list.
    let long = random_list(&mut rng, n, INITIAL_ENTRIES + 476);
    let short = random_list(&mut rng, n, 70);
    for lists in [vec![short.clone()], vec![long.clone()], vec![long, short]] {
        let got = gpu_adjusted(&logits, &lists);
        let mut want = logits.clone();
        for a in lists.iter().flatten() {
            // rep(x + bias) - penalty, rep(y) = y / factor for y > 0, else y · factor.
            let y = want[a.token as usize] + a.bias;
            let y = if y > 0.0 { y / a.factor } else { y * a.factor };
            want[a.token as usize] = y - a.penalty;
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "logit {i}: {g} vs {w} ({} lists)",
                lists.len()
            );
        }
    }
    // An empty list dispatches nothing and changes nothing.
    assert_eq!(gpu_adjusted(&logits, &[vec![]]), logits);
}

fn gpu_log_sum_exp(logits: &[f32]) -> (f32, f32) {
    let ctx = gpu();
    let lb = ctx.storage_init("logits", logits).unwrap();
    let rb = ctx.storage("result", LogSumExp::result_bytes()).unwrap();
    run(
        ctx,
        &[&LogSumExp::new(ctx, logits.len()).dispatch(ctx, &lb, &rb)],
    );
    let v: Vec<f32> = bytemuck::pod_collect_to_vec(&ctx.read_buffer(&rb, 8).unwrap());
    (v[0], v[1])
}

/// ln Σ exp in f64 over the non-NaN logits.
fn cpu_log_sum_exp(logits: &[f32]) -> f64 {
    let kept = || logits.iter().filter(|v| !v.is_nan()).map(|&v| f64::from(v));
    let max = kept().fold(f64::NEG_INFINITY, f64::max);
    max + kept().map(|v| (v - max).exp()).sum::<f64>().ln()
}

#[test]
fn logsumexp_equals_the_f64_sum_on_vocabulary_sized_and_odd_logits() {
    let mut rng = Rng::new(41);
    let mut cases: Vec<(&str, Vec<f32>)> = vec![
        ("vocabulary", rng.vec(151_936, 12.0)),
        ("odd size", rng.vec(257, 2.0)),
        ("one", vec![-3.25]),
        // Far past exp's range: only a max-shifted sum survives.
        ("large", rng.vec(10_000, 1000.0)),
    ];
    let mut holes = rng.vec(4097, 5.0);
    for i in (0..4097).step_by(5) {
        holes[i] = if i % 2 == 0 {
            f32::NAN
        } else {
            f32::NEG_INFINITY
        };
    }
    cases.push(("NaN and -inf", holes));
    for (what, logits) in cases {
        let (log_z, max) = gpu_log_sum_exp(&logits);
        let want = cpu_log_sum_exp(&logits);
        assert!(
            (f64::from(log_z) - want).abs() < 2e-6 * want.abs().max(1.0),
            "{what}: {log_z} vs {want}"
        );
        let want_max = logits
            .iter()
            .copied()
            .filter(|v| !v.is_nan())
            .fold(f32::MIN, f32::max);
        assert_eq!(max, want_max, "{what}");
    }
}

/// Under an allowed-token mask the 64 best allowed logits, as a CPU sort of the allowed
/// ones gives them: random masks, all but one token masked, only the tail word's tokens
/// allowed, vocabularies that are not a multiple of 32, and the flag off (all allowed,
/// whatever the bits say).
#[test]
fn masked_topk_equals_a_cpu_sort_of_the_allowed_logits() {
    let mut rng = Rng::new(17);
    for n in [151_936, 1000, 321, 65, 33, 31] {
        let logits = rng.vec(n, 8.0);
        let keep: Vec<bool> = (0..n).map(|_| rng.uniform() < -0.4).collect();
        let one = n * 2 / 3;
        let tail = n - n % 32;
        let masks: [(&str, &dyn Fn(usize) -> bool); 4] = [
            ("random 30%", &|i| keep[i]),
            ("all but one", &|i| i == one),
            ("tail word only", &|i| i >= tail.min(n - 1)),
            ("none allowed but the last", &|i| i == n - 1),
        ];
        for (what, allowed) in masks {
            let want: Vec<(u32, f32)> = {
                let kept: Vec<f32> = (0..n)
                    .map(|i| if allowed(i) { logits[i] } else { f32::NAN })
                    .collect();
                cpu_topk(&kept)
            };
            let got = gpu_topk_masked(&logits, Some(allowed));
            assert_eq!(got, want, "{what} (n = {n})");
        }
        assert_eq!(
            gpu_topk_masked(&logits, None),
            cpu_topk(&logits),
            "flag off (n = {n})"
        );
    }
}
