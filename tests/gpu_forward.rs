//! The whole GPU decode step against the CPU oracle (`cpu::Model`, Q4 weights on both
//! sides) on the tiny fixture models of all three architectures, in every device profile
//! forced on the test adapter (`gpu`, the composition real GPUs and Safari get, among
//! them): logits every step and greedy tokens over 24 steps (a near tie in the oracle's
//! logits, within the tolerance, may go either way).
//!
//! The GPU keeps the KV cache in f16, the oracle in f32: logits differ by that rounding.
//! Tolerance: max abs err ≤ 1e-3 · max|logit| + 1e-4 per step, 4e-3 · max|logit| where
//! the profile computes in f16 (`gpu_common::logits_rel`; the measured error is printed);
//! a wrong kernel or a wrong position moves logits by far more.

mod gpu_common;

use gpu_common::{assert_close, gemv_f16, gpu, logits_rel, profiles};
use pocketrt::cpu::{Model, WeightMode};
use pocketrt::format::{open, ModelSource};
use pocketrt::gpu::forward::StepOptions;
use pocketrt::gpu::kernels::common::attention::AttentionVariant;
use pocketrt::gpu::{DeviceProfile, GpuModel, ProfiledContext};
use pocketrt::quant::WeightFormat;
use pocketrt::synth::{preset, SynthSource};
use std::path::PathBuf;
use std::sync::Arc;

const CONTEXT: usize = 64;
const STEPS: usize = 24;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/oracle")
        .join(name)
}

fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// The logits tolerance of `assert_close` for `want`.
fn tolerance(want: &[f32], rel: f32) -> f32 {
    rel * want.iter().fold(0f32, |m, v| m.max(v.abs())) + 1e-4
}

fn check_model(name: &str) {
    let dir = fixture(name);
    check_source(name, || open(&dir).unwrap());
}

/// GPU decode against the oracle in every profile, each loading the model from its own
/// `source()`: with the output projection folded into attention and as a GEMV of its
/// own, whatever the profile's default.
fn check_source(name: &str, source: impl Fn() -> Box<dyn ModelSource>) {
    check_source_as(name, source, WeightFormat::Q4);
}

/// [`check_source`] with each matrix as `weights` holds it, on both sides.
fn check_source_as(name: &str, source: impl Fn() -> Box<dyn ModelSource>, weights: WeightFormat) {
    for ctx in profiles() {
        for fold in [true, false] {
            let what = format!(
                "{name} {weights:?} profile {} fold {fold}",
                ctx.profile.name
            );
            // QKV, attention with the output projection folded in, residual + parts +
            // gate/up, down (every fixture's heads fold: head_dim % 8 == 0); unfolded, the
            // O GEMV too. A Q8 W_o never folds (the attention designs read Q4).
            let folds = fold && !weights.stores_q8("f32");
            let case = Case {
                fold,
                per_layer: if folds { 4 } else { 5 },
                weights,
            };
            check_step(ctx, &what, &source, case);
        }
    }
}

/// How one [`check_step`] loads the model, and what it expects.
struct Case {
    /// Ask to fold W_o into attention.
    fold: bool,
    /// Dispatches per layer.
    per_layer: usize,
    weights: WeightFormat,
}

/// The decode step of `case` against the oracle reading the weights alike.
fn check_step(
    ctx: &Arc<ProfiledContext>,
    name: &str,
    source: &impl Fn() -> Box<dyn ModelSource>,
    case: Case,
) {
    let mode = match case.weights {
        WeightFormat::Q4 => WeightMode::Q4,
        WeightFormat::Q8 => WeightMode::Q8,
        WeightFormat::Keep => WeightMode::Keep,
    };
    let oracle = Model::load(&mut *source(), mode).unwrap();
    let mut cache = oracle.new_cache(CONTEXT).unwrap();
    let options = StepOptions {
        fold_output: Some(case.fold),
    };
    let mut model =
        GpuModel::load_as(ctx.clone(), &mut *source(), CONTEXT, case.weights, options).unwrap();
    let cfg = &model.config;
    let want = case.per_layer;
    let per_layer = model.dispatches_per_layer();
    assert_eq!(
        model.dispatches_per_token(),
        per_layer * cfg.n_layers + 3,
        "embed, the layers, head and argmax"
    );
    // Every attention design fuses q/k-norm + RoPE + KV write.
    assert_eq!(per_layer, want, "dispatches per layer");
    println!(
        "{name}: {} dispatches per token ({per_layer} per layer, {:?} attention), 1 submit",
        model.dispatches_per_token(),
        model.attention_variant()
    );

    let prompt = [3u32, 141, 59, 26, 5];
    let rel = logits_rel(gemv_f16(ctx));
    let (mut gpu_tokens, mut cpu_tokens) = (vec![], vec![]);
    let mut token = prompt[0];
    for pos in 0..prompt.len() + STEPS {
        let want = oracle.forward(token, &mut cache).unwrap();
        let (next, got) = model.decode_with_logits(token, pos).unwrap();
        assert_close(&format!("{name} logits pos {pos}"), &got, &want, rel, 1e-4);
        assert_eq!(
            next,
            argmax(&got),
            "GPU argmax disagrees with its own logits"
        );
        token = match prompt.get(pos + 1) {
            Some(t) => *t,
            None => {
                // A near tie in the oracle's logits (within the tolerance) may go either
                // way; the GPU's pick is then counted as the oracle's.
                let best = argmax(&want);
                let gap = want[best as usize] - want[next as usize];
                gpu_tokens.push(if gap <= tolerance(&want, rel) {
                    best
                } else {
                    next
                });
                cpu_tokens.push(best);
                best
            }
        };
    }
    assert_eq!(gpu_tokens, cpu_tokens, "{name}: greedy tokens");
    println!("{name}: greedy {gpu_tokens:?}");
}

#[test]
fn qwen3_gpu_decode_matches_the_oracle() {
    check_model("qwen3");
}

#[test]
fn qwen2_gpu_decode_with_bias_and_untied_head_matches_the_oracle() {
    check_model("qwen2");
}

#[test]
fn llama_gpu_decode_matches_the_oracle() {
    check_model("llama");
}

/// Every matrix Q8 g32 (the Q8 GEMVs in every role, the Q8 embedding and head; W_o as a
/// GEMV): the untied qwen2 fixture with its bias, against the oracle's Q8.
#[test]
fn q8_gpu_decode_matches_the_q8_oracle() {
    let dir = fixture("qwen2");
    check_source_as("qwen2", || open(&dir).unwrap(), WeightFormat::Q8);
}

/// Q4 and Q8 matrices in one model, as a Q4_K_M file's: `keep` over a source that says
/// some matrices are stored as Q4_1 (so kept as Q4) and the rest as f32 (held as Q8),
/// so each role has both formats across the layers; W_o all Q4, so it folds.
#[test]
fn mixed_q4_and_q8_gpu_decode_matches_the_oracle() {
    let dir = fixture("qwen3");
    let q4 = [
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.0.attn_v.weight",
        "blk.0.attn_output.weight",
        "blk.1.attn_output.weight",
        "blk.1.ffn_gate.weight",
        "blk.1.ffn_up.weight",
        "blk.0.ffn_down.weight",
    ];
    let source = || -> Box<dyn ModelSource> { Box::new(StoredAs::new(open(&dir).unwrap(), &q4)) };
    for ctx in profiles() {
        for fold in [true, false] {
            let what = format!("qwen3 mixed profile {} fold {fold}", ctx.profile.name);
            let case = Case {
                fold,
                per_layer: if fold { 4 } else { 5 },
                weights: WeightFormat::Keep,
            };
            check_step(ctx, &what, &source, case);
        }
        let m = GpuModel::load_as(
            ctx.clone(),
            &mut *source(),
            8,
            WeightFormat::Keep,
            Default::default(),
        );
        assert_eq!(
            m.unwrap().weights_summary(),
            "5 q4 + 4 q8",
            "{}",
            ctx.profile.name
        );
    }
}

/// A source whose listed tensors say they are stored as Q4_1 (the rest as they are).
struct StoredAs {
    inner: Box<dyn ModelSource>,
    tensors: Vec<pocketrt::format::SourceTensor>,
}

impl StoredAs {
    fn new(inner: Box<dyn ModelSource>, q4: &[&str]) -> StoredAs {
        let mut tensors = inner.tensors().to_vec();
        for t in &mut tensors {
            if q4.contains(&t.name.as_str()) {
                t.dtype = "Q4_1".into();
            }
        }
        StoredAs { inner, tensors }
    }
}

impl ModelSource for StoredAs {
    fn config(&self) -> &pocketrt::ModelConfig {
        self.inner.config()
    }
    fn tensors(&self) -> &[pocketrt::format::SourceTensor] {
        &self.tensors
    }
    fn read_f32(&mut self, name: &str) -> pocketrt::Result<Vec<f32>> {
        self.inner.read_f32(name)
    }
    fn read_q4(
        &mut self,
        name: &str,
    ) -> pocketrt::Result<(pocketrt::quant::Q4Tensor, pocketrt::quant::MergeStats)> {
        self.inner.read_q4(name)
    }
    fn tokenizer_json(&mut self) -> pocketrt::Result<Option<String>> {
        self.inner.tokenizer_json()
    }
    fn chat_template(&self) -> Option<String> {
        self.inner.chat_template()
    }
    fn container(&self) -> String {
        self.inner.container()
    }
}

/// Safari advertises no `packed_4x8_integer_dot_product`: with it taken away, every
/// profile's shaders get `unpack4xU8` polyfilled (`kernels::common::wgsl_compat`), and decode (W_o
/// folded: the attention's Q4 unpacking too) and batched prefill (the GEMM's) still match
/// the oracle.
#[test]
fn without_wgsl_packed_4x8_every_profile_decodes_and_prefills_like_the_oracle() {
    let dir = fixture("qwen3");
    let source = || open(&dir).unwrap();
    for base in profiles() {
        // The same device as an adapter without the extension reports it, in the profile.
        let mut gpu = base.gpu.counted_apart();
        gpu.adapter.features.packed_4x8 = false;
        let profile = DeviceProfile::named(base.profile.name, &gpu.adapter).unwrap();
        assert!(!profile.packed_4x8);
        let ctx = Arc::new(ProfiledContext::new(Arc::new(gpu), profile));
        let what = format!("qwen3 profile {} without packed_4x8", ctx.profile.name);
        let case = Case {
            fold: true,
            per_layer: 4,
            weights: WeightFormat::Q4,
        };
        check_step(&ctx, &what, &source, case);
        // Batched prefill of a prompt against the oracle's last logits.
        let prompt = [3u32, 141, 59, 26, 5, 9, 26, 53, 58, 97];
        let oracle = Model::load(&mut *source(), WeightMode::Q4).unwrap();
        let mut cache = oracle.new_cache(CONTEXT).unwrap();
        let want = prompt
            .iter()
            .map(|&t| oracle.forward(t, &mut cache).unwrap());
        let want = want.last().unwrap();
        let options = StepOptions::default();
        let mut model = GpuModel::load_as(
            ctx.clone(),
            &mut *source(),
            CONTEXT,
            WeightFormat::Q4,
            options,
        )
        .unwrap();
        let got = model.prefill(&prompt, 0).unwrap();
        let rel = logits_rel(gemv_f16(&ctx));
        assert_close(&format!("{what} prefill"), &got, &want, rel, 1e-4);
    }
}

#[test]
fn odd_layer_count_gpu_decode_matches_the_oracle() {
    // The residual alternates between two buffers per layer; with an odd layer count the
    // embedding starts in the other one, so that the head still reads the last layer's.
    let mut cfg = preset("tiny-qwen3").unwrap();
    cfg.n_layers = 3;
    check_source("tiny-qwen3 3 layers", || {
        Box::new(SynthSource::new(cfg.clone(), 5).unwrap())
    });
}

/// The GPU profiles fold W_o only through the group design (a part per KV head): a GQA
/// group too large for its workgroup memory (16 heads of 128 per KV head) runs the
/// workgroup design with W_o as a GEMV of its own (5 dispatches per layer), asked to fold
/// or not, and matches the oracle.
#[test]
fn gpu_profile_decodes_a_gqa_group_too_wide_to_fold_with_the_o_gemv() {
    let mut cfg = preset("tiny-qwen3").unwrap();
    (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim) = (16, 1, 128);
    let source = || -> Box<dyn ModelSource> { Box::new(SynthSource::new(cfg.clone(), 7).unwrap()) };
    let gpu = profiles().iter().find(|c| c.profile.name == "gpu").unwrap();
    for fold in [true, false] {
        let what = format!("16:1 heads of 128, profile gpu asked to fold {fold}");
        let case = Case {
            fold,
            per_layer: 5,
            weights: WeightFormat::Q4,
        };
        check_step(gpu, &what, &source, case);
        let options = StepOptions {
            fold_output: Some(fold),
        };
        let model = GpuModel::load_with(gpu.clone(), &mut *source(), CONTEXT, options).unwrap();
        assert_eq!(model.attention_variant(), AttentionVariant::Workgroup);
    }
}

/// The default step is the profile's: W_o folded into attention (4 dispatches per layer)
/// in the `gpu` and `lavapipe` profiles, a GEMV of its own in `swiftshader`'s (5), each
/// in the profile's attention design.
#[test]
fn default_step_is_the_profiles_design() {
    for ctx in profiles() {
        let p = ctx.profile;
        let src = &mut *open(&fixture("qwen3")).unwrap();
        let model = GpuModel::load(ctx.clone(), src, 16).unwrap();
        let want = if p.fold_output { 4 } else { 5 };
        assert_eq!(model.dispatches_per_layer(), want, "{}", p.name);
        assert_eq!(model.attention_variant(), p.attention, "{}", p.name);
    }
}

/// The test adapter gets its own profile: on lavapipe (CI) the lavapipe design with its
/// 8-wide subgroups (a driver or wgpu change that loses them shows here, not as a silent
/// slowdown).
#[test]
fn the_test_adapter_is_detected_as_its_profile() {
    let ctx = gpu();
    println!("{}: {}", ctx.adapter.name, ctx.profile);
    if ctx.adapter.name.contains("llvmpipe") && !ctx.profile.forced {
        assert_eq!(ctx.profile.name, "lavapipe");
        assert_eq!(ctx.profile.attention, AttentionVariant::Lanes);
        assert_eq!(ctx.profile.subgroup_size, Some(8));
    }
}

#[test]
fn decode_past_the_context_is_a_typed_error() {
    let mut model =
        GpuModel::load(gpu().clone(), &mut *open(&fixture("llama")).unwrap(), 4).unwrap();
    assert!(model.decode(1, 3).is_ok());
    match model.decode(1, 4) {
        Err(pocketrt::Error::ContextTooLong {
            position: 4,
            context: 4,
        }) => {}
        other => panic!("expected ContextTooLong, got {other:?}"),
    }
    assert!(matches!(
        model.decode(512, 0),
        Err(pocketrt::Error::InvalidArgument(_))
    ));
}

/// Dispatches and submits per decode token in every profile at its defaults, counted
/// from the step's own dispatch list (`step_reads`, what the step encodes): embed, head
/// and argmax plus 4 per layer where the profile folds W_o into attention (`gpu` and
/// `gpu-subgroups`, a part per KV head in the group design; `lavapipe`); `swiftshader`,
/// which does not fold (the workgroup fold is slower there), has exactly one more per
/// layer, the O GEMV. One submit per token, step by step.
#[test]
fn decode_dispatches_and_submits_per_token_in_every_profile() {
    let dir = fixture("qwen3");
    for ctx in profiles() {
        let name = ctx.profile.name;
        let mut model = GpuModel::load(ctx.clone(), &mut *open(&dir).unwrap(), CONTEXT).unwrap();
        let layers = model.config.n_layers;
        let reads = model.step_reads(0);
        let count = |kernel: &str| {
            let of = |t: &&pocketrt::gpu::KernelTime| t.kernel == kernel;
            reads.iter().filter(of).map(|t| t.dispatches).sum::<usize>()
        };
        let all: usize = reads.iter().map(|t| t.dispatches).sum();
        assert_eq!(all, model.dispatches_per_token(), "{name}");
        for k in ["embed", "head", "argmax"] {
            assert_eq!(count(k), 1, "{name}: {k}");
        }
        for k in ["qkv", "attention", "gate_up", "down"] {
            assert_eq!(count(k), layers, "{name}: {k} per layer");
        }
        let o = count("o");
        assert_eq!(
            o,
            if ctx.profile.fold_output { 0 } else { layers },
            "{name}"
        );
        assert_eq!(all, 3 + 4 * layers + o, "{name}: nothing else");
        if ctx.profile.fold_output {
            assert!(all <= 3 + 4 * layers, "{name}: {all} dispatches");
        }
        if name.starts_with("gpu") {
            assert_eq!(
                all,
                3 + 4 * layers,
                "{name}: W_o folded into the group attention"
            );
            assert_eq!(model.attention_variant(), AttentionVariant::Group, "{name}");
        }
        println!("{name}: {all} dispatches per token ({layers} layers, O GEMVs {o})");
        let before = model.submits();
        let mut t = 5;
        for pos in 0..4 {
            t = model.decode(t, pos).unwrap();
        }
        assert_eq!(model.submits() - before, 4, "{name}: one submit per token");
    }
}
