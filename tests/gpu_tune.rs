//! The on-device tuner (`gpu::tune`): every design it can choose decodes like the CPU
//! oracle, a sweep keeps to its budget and chooses the fastest design it timed, and the
//! choice is kept (the next load applies it without a sweep) and shown in the
//! description. On lavapipe, in the GPU profiles forced (CPU-adapter profiles have
//! nothing to tune).
//!
//! The oracle check runs a model of Pocket's head shape (14 q heads, 2 KV heads of 64:
//! GQA 7:1) past position 1,024, so each attention split length (256, 512, 1,024) merges
//! several splits; logits within the whole-model tolerance (`gpu_common::logits_rel`).

mod gpu_common;

use gpu_common::{assert_close, logits_rel, profiles};
use pocketrt::cpu::{Model, WeightMode};
use pocketrt::gpu::tune::{self, Stage, TunePolicy, Tuned};
use pocketrt::gpu::weights::ModelWeights;
use pocketrt::gpu::{GpuModel, ProfiledContext};
use pocketrt::quant::WeightFormat;
use pocketrt::synth::{preset, SynthSource};
use pocketrt::ModelConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Prompt length: past the longest split (1,024).
const PROMPT: usize = 1030;
/// Decode steps checked after the prompt.
const STEPS: usize = 3;

/// Pocket's heads on a small model.
fn pocket_heads() -> ModelConfig {
    let mut c = preset("tiny-qwen3").unwrap();
    c.n_heads = 14;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.hidden_size = 256;
    c.ffn_size = 512;
    c.max_context = 2048;
    c
}

fn source(c: &ModelConfig) -> SynthSource {
    SynthSource::new(c.clone(), 7).unwrap()
}

/// The GPU profiles the test adapter runs (those with something to tune).
fn tunable() -> Vec<&'static Arc<ProfiledContext>> {
    let out: Vec<_> = profiles()
        .iter()
        .filter(|c| Tuned::of(&c.profile).is_some())
        .collect();
    assert!(!out.is_empty(), "no GPU profile on the test adapter");
    out
}

#[test]
fn every_design_the_tuner_can_choose_decodes_like_the_oracle() {
    let cfg = pocket_heads();
    let context = PROMPT + STEPS + 1;
    let oracle = Model::load(&mut source(&cfg), WeightMode::Q4).unwrap();
    let mut cache = oracle.new_cache(context).unwrap();
    let tokens: Vec<u32> = (0..PROMPT + STEPS).map(|i| (i * 37 % 997) as u32).collect();
    let want: Vec<Vec<f32>> = tokens
        .iter()
        .map(|&t| oracle.forward(t, &mut cache).unwrap())
        .collect();
    let last = PROMPT - 1;
    for base in tunable() {
        let rel = logits_rel(base.profile.shader_f16);
        // The prompt once per profile (prefill is not tuned): its cache rows go to
        // every candidate, which decodes after them.
        let weights = upload(base, &cfg);
        let mut first = GpuModel::with_options(
            base.clone(),
            cfg.clone(),
            weights.clone(),
            context,
            Default::default(),
        )
        .unwrap();
        let got = first.prefill(&tokens[..PROMPT], 0).unwrap();
        assert_close(
            &format!("{} prefill pos {last}", base.profile.name),
            &got,
            &want[last],
            rel,
            1e-4,
        );
        let rows = first.read_kv(0, PROMPT).unwrap();
        drop(first.release());
        let candidates = tune::candidates(&base.profile, &cfg);
        // The profile's own design and at least one other value of every constant.
        assert!(candidates.len() >= 8, "{} candidates", candidates.len());
        for profile in candidates {
            let ctx = Arc::new(base.with_device_profile(profile));
            let what = format!("{} {}", profile.name, Tuned::of(&profile).unwrap());
            let mut model = GpuModel::with_options(
                ctx,
                cfg.clone(),
                weights.clone(),
                context,
                Default::default(),
            )
            .unwrap();
            model.write_kv(0, PROMPT, &rows).unwrap();
            for pos in PROMPT..PROMPT + STEPS {
                let (_, got) = model.decode_with_logits(tokens[pos], pos).unwrap();
                assert_close(&format!("{what} pos {pos}"), &got, &want[pos], rel, 1e-4);
            }
            drop(model.release());
            println!(
                "{what}: like the oracle at positions {PROMPT}..{}",
                PROMPT + STEPS
            );
        }
    }
}

/// The weights of `cfg` uploaded on `ctx`.
fn upload(ctx: &ProfiledContext, cfg: &ModelConfig) -> ModelWeights {
    ModelWeights::upload(ctx, &mut source(cfg), WeightFormat::Q4).unwrap()
}

#[test]
fn a_sweep_keeps_its_budget_chooses_the_fastest_and_is_remembered() {
    let store = std::env::temp_dir().join(format!("pocketrt-tune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&store);
    std::env::set_var("POCKETRT_CACHE_DIR", &store);
    let cfg = pocket_heads();
    let base = tunable()[0].clone();
    let weights = upload(&base, &cfg);

    // Auto leaves a CPU adapter as it is, even in a GPU profile.
    let (ctx, tuning) = tune::tuned_context(
        base.clone(),
        &cfg,
        &weights,
        TunePolicy::Auto,
        tune::DEFAULT_BUDGET,
    )
    .unwrap();
    assert!(tuning.is_none() && ctx.profile == base.profile);

    // A sweep: the budget bounds it (give or take the candidate running when it ends).
    // The budget: enough for a few designs however busy the machine is, from one trial
    // of the profile's own design (a sweep with no budget; its pipelines stay compiled).
    let one = pollster::block_on(tune::sweep(&base, &cfg, &weights, Duration::ZERO)).unwrap();
    assert_eq!(
        one.trials.len(),
        1,
        "no budget: the profile's own design alone"
    );
    let budget = Duration::from_secs_f64((4.0 * one.seconds).max(3.0));
    let t = Instant::now();
    let (ctx, tuning) =
        tune::tuned_context(base.clone(), &cfg, &weights, TunePolicy::On, budget).unwrap();
    let took = t.elapsed().as_secs_f64();
    let tuning = tuning.expect("a GPU profile is tuned");
    let sweep = tuning.sweep.as_ref().expect("nothing kept yet: a sweep");
    println!("{}\n{}", tuning.describe(), sweep.table());
    // The budget is checked before each candidate: the last one may run past it, and so
    // may the final race of the profile's own design (which always runs first) against
    // the chosen one.
    let n = sweep.trials.len();
    let first = sweep.trials[0].seconds;
    let last_two: f64 = sweep.trials[n.saturating_sub(2).max(1)..]
        .iter()
        .map(|t| t.seconds)
        .sum();
    let bound = budget.as_secs_f64().max(first) + last_two + 0.25;
    assert!(
        sweep.seconds <= bound,
        "{} s for a budget of {budget:?}\n{}",
        sweep.seconds,
        sweep.table()
    );
    // Around the sweep: reading and writing the kept designs.
    assert!(
        took <= sweep.seconds + 2.0,
        "{took} s, the sweep {} s",
        sweep.seconds
    );
    assert!(sweep.trials.len() >= 2, "{}", sweep.table());
    assert!(
        sweep.trials.iter().all(|t| t.ms.is_some()),
        "{}",
        sweep.table()
    );
    assert_eq!(sweep.trials[0].design, Tuned::of(&base.profile).unwrap());
    // Each candidate raced the best so far and replaced it exactly when MARGIN faster
    // there; the chosen is the last to replace it, kept if it beat the profile's own
    // design again in the final race.
    let start = sweep.trials[0].design;
    let mut best = start;
    for t in sweep.trials[1..].iter().filter(|t| t.stage != tune::FINAL) {
        let (ms, vs) = (t.ms.unwrap(), t.vs_ms.expect("raced"));
        if ms < vs * (1.0 - tune::MARGIN) {
            best = t.design;
        }
    }
    let last = sweep.trials.last().unwrap();
    if best == start {
        assert!(last.stage != tune::FINAL, "{}", sweep.table());
        assert_eq!(sweep.best, start);
    } else {
        assert_eq!((last.stage.as_str(), last.design), (tune::FINAL, start));
        let (own, chosen) = (last.ms.unwrap(), last.vs_ms.unwrap());
        let kept = chosen < own * (1.0 - tune::MARGIN);
        assert_eq!(
            sweep.best,
            if kept { best } else { start },
            "{}",
            sweep.table()
        );
        let (b, s) = sweep.speedup().unwrap();
        assert_eq!((b, s), if kept { (chosen, own) } else { (own, own) });
    }
    assert_eq!(tuning.tuned, sweep.best);
    assert_eq!(ctx.profile, sweep.best.apply(&base.profile));
    assert!(tuning.describe().contains(&sweep.best.to_string()));
    // The sweep's context counts the weights' bytes with the model's.
    assert_eq!(ctx.allocated_bytes(), base.allocated_bytes());
    assert!(store.join("gpu-tune.json").is_file());

    // The next load: the kept design, no sweep.
    let t = Instant::now();
    let (again, kept) =
        tune::tuned_context(base.clone(), &cfg, &weights, TunePolicy::On, budget).unwrap();
    let kept = kept.unwrap();
    assert!(kept.sweep.is_none(), "{}", kept.describe());
    assert!(kept.describe().starts_with("tuned design remembered"));
    assert_eq!((kept.tuned, again.profile), (sweep.best, ctx.profile));
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );

    // Force sweeps again; another model shape is a key of its own. (No budget: the
    // profile's own design alone is timed.)
    let zero = Duration::ZERO;
    let forced = tune::tuned_context(base.clone(), &cfg, &weights, TunePolicy::Force, zero);
    let forced = forced.unwrap().1.unwrap().sweep.unwrap();
    assert!(
        forced.trials.len() == 1 && !forced.complete,
        "{}",
        forced.table()
    );
    let mut other = cfg.clone();
    other.ffn_size = 384;
    let other_weights = upload(&base, &other);
    let fresh = tune::tuned_context(base.clone(), &other, &other_weights, TunePolicy::On, zero);
    assert!(fresh.unwrap().1.unwrap().sweep.is_some());

    // A model on the tuned context runs what it was tuned to, like the oracle.
    let mut model =
        GpuModel::with_options(ctx.clone(), cfg.clone(), weights, 64, Default::default()).unwrap();
    let oracle = Model::load(&mut source(&cfg), WeightMode::Q4).unwrap();
    let mut cache = oracle.new_cache(64).unwrap();
    for (pos, token) in [3u32, 141, 59, 26].into_iter().enumerate() {
        let want = oracle.forward(token, &mut cache).unwrap();
        let (_, got) = model.decode_with_logits(token, pos).unwrap();
        assert_close(
            "tuned model",
            &got,
            &want,
            logits_rel(ctx.profile.shader_f16),
            1e-4,
        );
    }
    let _ = std::fs::remove_dir_all(&store);
}

#[test]
fn the_tune_policy_parses_and_every_stage_starts_from_the_current_design() {
    assert_eq!(TunePolicy::parse("off").unwrap(), TunePolicy::Off);
    assert_eq!(TunePolicy::parse(" Force ").unwrap(), TunePolicy::Force);
    assert_eq!(TunePolicy::parse("").unwrap(), TunePolicy::Auto);
    assert_eq!(TunePolicy::parse("true").unwrap(), TunePolicy::On);
    let err = TunePolicy::parse("fast").unwrap_err().to_string();
    assert!(err.contains("off, auto, on or force"), "{err}");
    let cfg = pocket_heads();
    for base in tunable() {
        let cur = Tuned::of(&base.profile).unwrap();
        // The sweep starts from the profile as built; each candidate is the profile with
        // its constants, all different.
        assert_eq!(cur.apply(&base.profile), base.profile);
        let all: Vec<Tuned> = tune::candidates(&base.profile, &cfg)
            .iter()
            .map(|p| Tuned::of(p).unwrap())
            .collect();
        for (i, t) in all.iter().enumerate() {
            assert!(!all[..i].contains(t), "{t} twice");
            let p = t.apply(&base.profile);
            assert_eq!(Tuned::of(&p), Some(*t));
        }
        for stage in Stage::ALL {
            let shape = pocketrt::gpu::kernels::common::rope_kv::HeadShape {
                n_heads: cfg.n_heads,
                n_kv_heads: cfg.n_kv_heads,
                head_dim: cfg.head_dim,
                context: 1024,
            };
            let v = stage.variants(cur, &base.profile, shape);
            assert_eq!(v[0], cur, "{stage:?}");
        }
    }
    // CPU-adapter profiles (codes in textures) have nothing to tune.
    for ctx in profiles() {
        let none = ["lavapipe", "swiftshader"].contains(&ctx.profile.name);
        assert_eq!(
            Tuned::of(&ctx.profile).is_none(),
            none,
            "{}",
            ctx.profile.name
        );
        assert_eq!(tune::candidates(&ctx.profile, &cfg).is_empty(), none);
    }
}

#[test]
fn a_candidate_compiles_only_the_kernels_it_changes() {
    // A device of its own: other tests' pipelines do not count.
    let need = pocketrt::gpu::LimitsNeeded::default();
    let ctx = pollster::block_on(ProfiledContext::open_in(need, Some("gpu"))).unwrap();
    let ctx = Arc::new(ctx);
    let cfg = pocket_heads();
    let weights = upload(&ctx, &cfg);
    let build = |ctx: &Arc<ProfiledContext>| {
        let m = GpuModel::with_options(
            ctx.clone(),
            cfg.clone(),
            weights.clone(),
            64,
            Default::default(),
        );
        drop(m.unwrap().release());
        ctx.compiled_pipelines()
    };
    let first = build(&ctx);
    assert!(first >= 10, "{first} pipelines");
    assert_eq!(build(&ctx), first, "the same model again compiles nothing");
    // Another GEMV layout: its GEMVs (and the fused head argmax) only.
    let mut t = Tuned::of(&ctx.profile).unwrap();
    t.gemv.rps = if t.gemv.rps == 1 { 2 } else { 1 };
    let other = Arc::new(ctx.with_device_profile(t.apply(&ctx.profile)));
    let more = build(&other) - first;
    assert!(
        more > 0 && more * 3 < first,
        "{more} new pipelines of {first}"
    );
    println!("{first} pipelines; a candidate with another GEMV layout compiled {more}");
}
