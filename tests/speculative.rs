//! Speculative decoding on the real Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF
//! (POCKETRT_CODER_GGUF; scripts/test sets it) on the fast CPU backend: the same greedy
//! text with and without speculation on the 8 prompts of
//! tests/fixtures/speculative/prompts.json (lookup drafts, and a draft model: the same
//! file at Q4 g64), drafts accepted where the reply repeats its prompt, seeded sampling
//! reproducible, the token limit and a stop kept; on the GPU (lavapipe here; a missing
//! adapter fails, never skips) the same greedy text with lookup drafts, verified in
//! decode's recorded steps (the code edit, and every prompt in the long tier). The acceptance rule's distribution is
//! `speculate::tests` (chi-square).

mod real_data;
#[path = "speculative/prompts.rs"]
mod spec_prompts;

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format;
use pocketrt::generate::{reply_options, GenerateOptions, GenerateStats, Session};
use pocketrt::sampler::SamplerConfig;
use pocketrt::speculate::{DraftModel, SpecOptions};
use pocketrt::tokenizer::{ChatTemplate, Message, Tokenizer};
use real_data::coder_gguf;
use spec_prompts::{prompts, Prompt};

/// Tokens generated per prompt.
const GENERATE: usize = 48;
const CONTEXT: usize = 1024;

fn load(backend: Backend, weights: WeightMode) -> (Engine, Tokenizer, ChatTemplate) {
    let mut src = format::open(&coder_gguf()).unwrap();
    let tokenizer = Tokenizer::from_hf_json(&src.tokenizer_json().unwrap().unwrap()).unwrap();
    let template = ChatTemplate::new(&src.chat_template().unwrap()).unwrap();
    let engine = Engine::load(src.as_mut(), backend, weights, CONTEXT).unwrap();
    (engine, tokenizer, template)
}

fn session(backend: Backend) -> Session {
    let (engine, tokenizer, template) = load(backend, WeightMode::Keep);
    Session::new(engine, tokenizer, Some(template))
}

/// The chat-template tokens of a user message.
fn tokens(s: &Session, text: &str) -> Vec<u32> {
    let rendered = s
        .template()
        .unwrap()
        .render(&[Message::user(text)], &reply_options())
        .unwrap();
    s.tokenizer().encode(&rendered, true)
}

fn generate(s: &mut Session, text: &str, opts: &GenerateOptions) -> (String, GenerateStats) {
    let t = tokens(s, text);
    s.rewind(0);
    s.generate(&t, opts, |_| true).unwrap()
}

fn options(spec: Option<SpecOptions>) -> GenerateOptions {
    GenerateOptions {
        max_tokens: GENERATE,
        speculative: spec,
        ..Default::default()
    }
}

#[test]
fn greedy_text_is_the_same_with_lookup_drafts_and_with_a_draft_model() {
    let mut s = session(Backend::Cpu);
    let (draft_engine, draft_tok, _) = load(Backend::Cpu, WeightMode::Q4);
    let draft = DraftModel::new(draft_engine, &draft_tok, s.tokenizer()).unwrap();
    s.set_draft(Some(draft));
    let mut accepted_by = std::collections::BTreeMap::<String, (usize, usize)>::new();
    let mut model_accepted = 0;
    for p in prompts() {
        let (plain, plain_stats) = generate(&mut s, &p.text, &options(None));
        let (lookup, stats) = generate(&mut s, &p.text, &options(Some(SpecOptions::lookup())));
        assert_eq!(
            lookup, plain,
            "{}: lookup drafts changed the text",
            p.workload
        );
        assert_eq!(stats.generated_tokens, plain_stats.generated_tokens);
        assert_eq!(plain_stats.speculation.steps, 0);
        let spec = stats.speculation;
        let e = accepted_by.entry(p.workload.clone()).or_default();
        e.0 += spec.accepted;
        e.1 += spec.steps;
        println!(
            "{}: {} tokens; lookup: {} steps, {}/{} drafts accepted, {:.1} vs {:.1} tok/s",
            p.workload,
            stats.generated_tokens,
            spec.steps,
            spec.accepted,
            spec.drafted,
            stats.generate_tok_s(),
            plain_stats.generate_tok_s()
        );
        let (with_model, stats) = generate(
            &mut s,
            &p.text,
            &options(Some(SpecOptions::with_draft_model())),
        );
        assert_eq!(
            with_model, plain,
            "{}: a draft model changed the text",
            p.workload
        );
        model_accepted += stats.speculation.accepted;
    }
    // Replies that repeat their prompt take drafts (the test would pass vacuously if
    // nothing were ever drafted and accepted).
    let (code, steps) = accepted_by["code_edit"];
    assert!(
        code > steps,
        "code edits: {code} drafts accepted in {steps} steps"
    );
    assert!(accepted_by["rag"].0 > 0, "{accepted_by:?}");
    assert!(
        model_accepted > 0,
        "the draft model's drafts were never accepted"
    );
}

#[test]
fn seeded_sampling_with_drafts_repeats_and_keeps_limits() {
    let mut s = session(Backend::Cpu);
    let prompts = prompts();
    let text = &prompts[0].text;
    let sampled = |seed| GenerateOptions {
        sampler: SamplerConfig {
            temperature: 0.7,
            top_k: 40,
            top_p: 0.95,
            seed,
            ..SamplerConfig::greedy()
        },
        ..options(Some(SpecOptions::lookup()))
    };
    let (a, sa) = generate(&mut s, text, &sampled(11));
    let (b, _) = generate(&mut s, text, &sampled(11));
    assert_eq!(a, b, "the same seed gives the same text");
    assert_eq!(sa.generated_tokens, GENERATE);
    assert!(sa.speculation.accepted > 0, "{:?}", sa.speculation);
    // A limit inside a step's accepted drafts ends exactly there.
    let short = GenerateOptions {
        max_tokens: 5,
        ..options(Some(SpecOptions::lookup()))
    };
    let (_, st) = generate(&mut s, text, &short);
    assert_eq!(st.generated_tokens, 5);
    // A stop from the caller inside a step: nothing after it is streamed.
    let t = tokens(&s, text);
    s.rewind(0);
    let mut seen = 0;
    let (_, st) = s
        .generate_tokens(&t, &options(Some(SpecOptions::lookup())), |_, _| {
            seen += 1;
            seen < 7
        })
        .unwrap();
    assert_eq!(st.generated_tokens, 7);
    assert_eq!(seen, 7);
    // The rows a speculative reply leaves are the ones its tokens make: a request that
    // extends them, served from that cache, continues as it does from an empty cache.
    let (_, st) = generate(
        &mut s,
        &prompts[3].text,
        &options(Some(SpecOptions::lookup())),
    );
    assert!(st.speculation.accepted > 0, "{:?}", st.speculation);
    let mut follow = s.cached().to_vec();
    follow.extend(s.tokenizer().encode("\n\nAgain:", false));
    let reused = s.generate(&follow, &options(None), |_| true).unwrap();
    assert!(reused.1.reused_tokens > 100, "{:?}", reused.1);
    s.rewind(0);
    let fresh = s.generate(&follow, &options(None), |_| true).unwrap();
    assert_eq!(reused.0, fresh.0);
}

/// Greedy text on the GPU, with and without lookup drafts, for `prompts`.
fn gpu_greedy_is_the_same(prompts: &[Prompt]) {
    let t = std::time::Instant::now();
    let (engine, tokenizer, template) = load(Backend::Gpu, WeightMode::Q4);
    let mut s = Session::new(engine, tokenizer, Some(template));
    eprintln!("load {:?}", t.elapsed());
    let mut accepted = 0;
    for p in prompts {
        let t = std::time::Instant::now();
        let (plain, _) = generate(&mut s, &p.text, &options(None));
        let t_plain = t.elapsed();
        let (lookup, stats) = generate(&mut s, &p.text, &options(Some(SpecOptions::lookup())));
        assert_eq!(
            lookup, plain,
            "{}: lookup drafts changed the GPU's text",
            p.workload
        );
        eprintln!(
            "{}: {:?}; plain {t_plain:?}, with drafts {:?}",
            p.workload,
            stats.speculation,
            t.elapsed() - t_plain
        );
        accepted += stats.speculation.accepted;
    }
    assert!(accepted > 0, "no draft was ever accepted on the GPU");
}

#[test]
fn gpu_greedy_text_is_the_same_with_lookup_drafts() {
    let prompts = prompts();
    gpu_greedy_is_the_same(&prompts[..1]);
}

#[test]
#[ignore = "long tier: every prompt on lavapipe (~5 minutes)"]
fn gpu_greedy_text_is_the_same_with_lookup_drafts_on_every_prompt_long() {
    gpu_greedy_is_the_same(&prompts());
}
