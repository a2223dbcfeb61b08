//! GPU top-k (topk.wgsl) against a CPU sort: the 64 best (index, logit) pairs, best first,
//! ties to the lower index, NaN never chosen, fewer than 64 values handled.

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

/// The reference: stable sort by value descending (ties keep index order), NaN dropped.
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

#[test]
fn topk_equals_a_cpu_sort_on_vocabulary_sized_logits() {
    let mut rng = Rng::new(5);
    for n in [151_936, 65_536, 1000] {
        let logits = rng.vec(n, 12.0);
        let got = gpu_topk(&logits);
        assert_eq!(got.len(), TOPK_MAX, "n = {n}");
        assert_eq!(got, cpu_topk(&logits), "n = {n}");
    }
}

#[test]
fn topk_breaks_ties_by_index_skips_nan_and_handles_short_inputs() {
    // 300 equal values: the 64 lowest indices, in order.
    let flat = vec![1.5f32; 300];
    let got = gpu_topk(&flat);
    assert_eq!(got, cpu_topk(&flat));
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
    let got = gpu_topk(&edge);
    assert_eq!(&got[..3], &[(776, 9.0), (255, 8.0), (256, 8.0)]);
    assert_eq!(got, cpu_topk(&edge));
}
