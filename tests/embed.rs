//! Embeddings (`pocketrt::embed`, `Session::embed`) on the tiny Llama fixture
//! (tests/fixtures/oracle/llama, Q4 weights) on every native backend:
//! 1. the fast CPU backend's and the GPU's (the test adapter's profile, the shapes
//!    tests/gpu_session.rs compiles) pooled, normalised vectors against the oracle's, in
//!    every pooling, for inputs of 1 token, within one chunk and across chunks;
//! 2. an embedding between two chat requests leaves the conversation as it was: the
//!    continuation equals the one without the embedding, greedy token for token (on the
//!    GPU the overwritten KV rows are read back and written back);
//! 3. `Session::embed`: text = its tokens, the model's pooling as the default, a
//!    request's pooling over it, unit length, `dimensions`, and every bad input a typed
//!    error after which the session still works.

mod gpu_common;

use gpu_common::{gpu, Rng};
use pocketrt::cpu::fast::{FastModel, Precision};
use pocketrt::cpu::WeightMode;
use pocketrt::embed::{self, EmbedOptions, Pooling};
use pocketrt::engine::{Backend, Engine};
use pocketrt::format::open;
use pocketrt::generate::Session;
use pocketrt::tokenizer::{byte_level_json, Tokenizer};
use pocketrt::Error;
use std::path::PathBuf;

/// gpu_session's context: the same GPU pipelines.
const CONTEXT: usize = 128;
const POOLINGS: [Pooling; 3] = [Pooling::Last, Pooling::Mean, Pooling::Cls];

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/llama")
}

fn engine(backend: Backend) -> Engine {
    let src = &mut *open(&fixture()).unwrap();
    match backend {
        Backend::Gpu => Engine::load_on_gpu(gpu().clone(), src, CONTEXT).unwrap(),
        b => Engine::load(src, b, WeightMode::Q4, CONTEXT).unwrap(),
    }
}

fn tokens(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| (rng.next_u64() % 512) as u32).collect()
}

/// The pooled, normalised vector of `tokens` on `e`.
fn vector(e: &mut Engine, tokens: &[u32], pooling: Pooling) -> Vec<f32> {
    let hidden = e.config().hidden_size;
    let rows = e.hidden_states(tokens).unwrap();
    assert_eq!(rows.len(), tokens.len() * hidden);
    embed::finish(
        embed::pool(&rows, hidden, pooling),
        &EmbedOptions::default(),
    )
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Most a unit vector's value may differ from the oracle's (Q4 weights on both sides),
/// per backend. The fast CPU backend with f32 matrix inputs computes the oracle's numbers
/// (up to summation order): measured ≤ 8.1e-7. The GPU keeps the KV cache in f16: measured
/// ≤ 1.2e-4 on lavapipe. The fast CPU backend's default int8 inputs: measured ≤ 2.6e-2
/// (cosine ≥ 0.9979) on this tiny random model, so it is held to a cosine as well; a
/// wrong row, chunk or pooling gives a cosine below 0.9 here (printed below).
const BACKENDS: [(&str, f32, f64); 3] = [
    ("cpu f32 inputs", 1e-5, 0.999_999),
    ("gpu", 1e-3, 0.999_99),
    ("cpu int8 inputs", 4e-2, 0.997),
];

/// The rows of `input` on the backend named in [`BACKENDS`].
fn rows_on(name: &str, input: &[u32]) -> Vec<f32> {
    match name {
        "cpu f32 inputs" => {
            let src = &mut *open(&fixture()).unwrap();
            let model = FastModel::load(src, Precision::F32).unwrap();
            model.hidden_states(input).unwrap()
        }
        "gpu" => engine(Backend::Gpu).hidden_states(input).unwrap(),
        _ => engine(Backend::Cpu).hidden_states(input).unwrap(),
    }
}

#[test]
fn every_backend_embeds_like_the_oracle_in_every_pooling() {
    let mut oracle = engine(Backend::Reference);
    let hidden = oracle.config().hidden_size;
    // One token; within the CPU backend's 64-token chunk; across it.
    let inputs = [tokens(1, 1), tokens(23, 2), tokens(100, 3)];
    for (name, tolerance, min_cos) in BACKENDS {
        for input in &inputs {
            let rows = rows_on(name, input);
            assert_eq!(rows.len(), input.len() * hidden, "{name}");
            for pooling in POOLINGS {
                let want = vector(&mut oracle, input, pooling);
                let got = embed::finish(embed::pool(&rows, hidden, pooling), &Default::default());
                let err = max_abs(&got, &want);
                let cos = embed::cosine(&got, &want);
                let n = input.len();
                println!(
                    "{name} {n} tokens {}: max abs {err:.2e}, cosine {cos:.7}",
                    pooling.name()
                );
                assert!(
                    err <= tolerance && cos >= min_cos,
                    "{name} {n} tokens {pooling:?}: max abs {err} (≤ {tolerance}), cosine {cos} (≥ {min_cos})"
                );
            }
        }
    }
    // The poolings differ (each reads other rows): a pooling ignored would pass above.
    let input = &inputs[1];
    let [last, mean, cls] = POOLINGS.map(|p| vector(&mut oracle, input, p));
    let before_last = vector(&mut oracle, &input[..input.len() - 1], Pooling::Last);
    for (what, a, b) in [
        ("last, mean", &last, &mean),
        ("last, cls", &last, &cls),
        ("mean, cls", &mean, &cls),
        ("the last row, the one before", &last, &before_last),
    ] {
        let cos = embed::cosine(a, b);
        println!("{what}: cosine {cos:.4}");
        assert!(cos < 0.9, "{what}: cosine {cos}");
    }
    assert_eq!(cls, vector(&mut oracle, &input[..1], Pooling::Last));
}

#[test]
fn an_embedding_leaves_the_conversation_as_it_was() {
    let chat = tokens(40, 4);
    let more = [7, 11, 13];
    for backend in [Backend::Reference, Backend::Cpu, Backend::Gpu] {
        // Without an embedding: the chat, then more of it.
        let mut plain = engine(backend);
        let first = plain.greedy(&chat, 6, |_| true).unwrap();
        let want = plain.greedy(&more, 6, |_| true).unwrap();

        let mut e = engine(backend);
        assert_eq!(e.greedy(&chat, 6, |_| true).unwrap(), first);
        let held = e.position();
        // Shorter than the chat (rows 0..20 overwritten, then put back), then longer
        // than it (all of its rows), then one that fails part way (a token outside the
        // vocabulary).
        for input in [tokens(20, 5), tokens(90, 6), vec![1, 2, 9999]] {
            let _ = e.hidden_states(&input);
            assert_eq!(e.position(), held, "{backend:?}");
        }
        let got = e.greedy(&more, 6, |_| true).unwrap();
        assert_eq!(got, want, "{backend:?}: the chat after embeddings");
        println!("{backend:?}: {first:?} then {got:?}");
    }
}

/// A session on the fast CPU backend with a byte-level tokenizer (ids < 256, within the
/// fixture's vocabulary of 512).
fn session() -> Session {
    let tokenizer = Tokenizer::from_hf_json(&byte_level_json(&[])).unwrap();
    Session::new(engine(Backend::Cpu), tokenizer, None)
}

#[test]
fn session_embed_pools_normalises_truncates_and_rejects_bad_input() {
    let mut s = session();
    let hidden = s.engine().config().hidden_size;
    let opts = EmbedOptions::default();
    let text = "a short text to embed";
    let e = s.embed(text, &opts).unwrap();
    let ids = s.tokenizer().encode(text, true);
    assert_eq!(e.tokens, ids.len());
    assert_eq!(e.vector.len(), hidden);
    let norm: f64 = e.vector.iter().map(|&x| (x as f64).powi(2)).sum();
    assert!((norm - 1.0).abs() < 1e-5, "norm² {norm}");
    assert_eq!(s.embed(&ids[..], &opts).unwrap(), e, "text = its tokens");

    // The default is the last token's; the model's pooling replaces it; a request's
    // pooling replaces that.
    let mut engine_mean = engine(Backend::Cpu);
    let rows = engine_mean.hidden_states(&ids).unwrap();
    let pooled = |p| embed::finish(embed::pool(&rows, hidden, p), &opts);
    assert_eq!(e.vector, pooled(Pooling::Last));
    s.pooling = Some(Pooling::Mean);
    assert_eq!(s.embed(text, &opts).unwrap().vector, pooled(Pooling::Mean));
    let cls = EmbedOptions {
        pooling: Some(Pooling::Cls),
        ..opts
    };
    assert_eq!(s.embed(text, &cls).unwrap().vector, pooled(Pooling::Cls));
    s.pooling = None;

    // Matryoshka truncation: the first N values, normalised again.
    let short = EmbedOptions {
        dimensions: Some(8),
        ..opts
    };
    let mut want = e.vector[..8].to_vec();
    embed::l2_normalize(&mut want);
    assert_eq!(s.embed(text, &short).unwrap().vector, want);
    let raw = EmbedOptions {
        normalize: false,
        ..opts
    };
    let unnormed = s.embed(text, &raw).unwrap().vector;
    assert!((embed::cosine(&unnormed, &e.vector) - 1.0).abs() < 1e-6);

    // Bad input: typed errors, and the session goes on.
    let long = "x".repeat(CONTEXT + 1);
    for (what, result) in [
        ("empty text", s.embed("", &opts)),
        ("no tokens", s.embed(&[][..], &opts)),
        (
            "a token outside the vocabulary",
            s.embed(&[1, 512][..], &opts),
        ),
        (
            "dimensions 0",
            s.embed(
                text,
                &EmbedOptions {
                    dimensions: Some(0),
                    ..opts
                },
            ),
        ),
        (
            "dimensions past the hidden size",
            s.embed(
                text,
                &EmbedOptions {
                    dimensions: Some(hidden + 1),
                    ..opts
                },
            ),
        ),
    ] {
        match result {
            Err(Error::InvalidArgument(msg)) => println!("{what}: {msg}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    match s.embed(long.as_str(), &opts) {
        Err(Error::ContextTooLong { position, context }) => {
            assert_eq!((position, context), (CONTEXT + 1, CONTEXT))
        }
        other => panic!("too long: {other:?}"),
    }
    assert_eq!(s.embed(text, &opts).unwrap(), e);
}
