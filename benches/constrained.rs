//! Constrained decoding's cost: decode tok/s with and without a realistic JSON Schema (a
//! tool-call list: nested objects, enums, bounded strings and numbers) on the same model,
//! backend, sampler and seed, greedy and sampled (temperature 1, top-k 40), and the time
//! llguidance takes per token to compute the allowed-token mask (µs, p50 / p99, the
//! generated tokens replayed through a fresh constraint). Models: the synthetic
//! Pocket-shape model (`synth:pocket-0.3b`, seeded random weights, with the real Qwen2.5
//! tokenizer of 151,936 tokens) on the CPU backend and the GPU (lavapipe where there is no
//! GPU), and the real Qwen2.5-Coder-0.5B GGUF on the CPU backend. Prints one JSON object.
//!
//! Run: `cargo bench --bench constrained -- [CODER_GGUF] [-n TOKENS]` (default:
//! $POCKETRT_CODER_GGUF, 48 tokens). Without `--bench` (`cargo test --all-targets` runs
//! benches that way) it is a smoke run of 6 tokens.

use pocketrt::constrain::{Constraint, Grammar};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::generate::{GenerateOptions, Session};
use pocketrt::sampler::SamplerConfig;
use pocketrt::synth::SynthSource;
use pocketrt::tokenizer::Tokenizer;
use serde_json::{json, Value as Json};

const CONTEXT: usize = 512;

fn schema() -> Json {
    let s = |n: usize| json!({"type": "string", "maxLength": n});
    json!({"type": "object", "properties": {"calls": {"type": "array", "minItems": 3, "maxItems": 40, "items": {
        "type": "object", "properties": {
            "name": {"enum": ["get_weather", "search_web", "send_email", "create_event"]},
            "arguments": {"type": "object", "properties": {
                "query": s(200), "city": s(40), "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "urgent": {"type": "boolean"}}, "required": ["query"], "additionalProperties": false}},
        "required": ["name", "arguments"], "additionalProperties": false}}},
        "required": ["calls"], "additionalProperties": false})
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// One run: (tok/s, generated tokens, mask µs p50/p99 when constrained).
fn run(
    session: &mut Session,
    prompt: &[u32],
    sampler: &SamplerConfig,
    constraint: Option<&Constraint>,
    n: usize,
) -> Json {
    let opts = GenerateOptions {
        max_tokens: n,
        sampler: sampler.clone(),
        constraint: constraint.cloned(),
        ..Default::default()
    };
    let mut tokens = vec![];
    // Warm-up run, then the measured one (the cache is rolled back to the prompt).
    session.generate(prompt, &opts, |_| true).unwrap();
    let (_, stats) = session
        .generate_tokens(prompt, &opts, |tok, t| {
            tokens.push(tok.encode(t.text, false));
            true
        })
        .unwrap();
    let mut out = json!({"tok_s": stats.generate_tok_s(), "tokens": stats.generated_tokens});
    if let Some(c) = constraint {
        // The mask per token: the generated text's tokens replayed through a fresh matcher.
        let mut c = c.clone();
        let mut micros = vec![];
        for t in tokens.into_iter().flatten() {
            let t0 = std::time::Instant::now();
            if c.mask().is_err() || !pocketrt::constrain::allowed(c.mask().unwrap(), t) {
                break;
            }
            micros.push(t0.elapsed().as_micros() as u32);
            c.commit(t).unwrap();
        }
        micros.sort_unstable();
        if !micros.is_empty() {
            out["mask_us_p50"] = percentile(&micros, 0.5).into();
            out["mask_us_p99"] = percentile(&micros, 0.99).into();
            out["masks"] = micros.len().into();
        }
    }
    out
}

fn bench(name: &str, session: &mut Session, n: usize) -> Json {
    let tok = session.tokenizer();
    let prompt = tok.encode("Calls as JSON: ", true);
    let t0 = std::time::Instant::now();
    let trie = tok.token_trie(&[]).unwrap();
    let trie_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t0 = std::time::Instant::now();
    let c = trie.constrain(&Grammar::JsonSchema(schema())).unwrap();
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let greedy = SamplerConfig::greedy();
    let sampled = SamplerConfig {
        temperature: 1.0,
        top_k: 40,
        seed: 7,
        ..SamplerConfig::greedy()
    };
    let mut out = json!({"model": name, "backend": session.engine().description(),
        "vocab": tok.vocab_size(), "trie_build_ms": trie_ms, "schema_compile_ms": compile_ms});
    for (label, s) in [("greedy", &greedy), ("sampled", &sampled)] {
        let free = run(session, &prompt, s, None, n);
        let constrained = run(session, &prompt, s, Some(&c), n);
        let ratio = constrained["tok_s"].as_f64().unwrap() / free["tok_s"].as_f64().unwrap();
        out[label] = json!({"unconstrained": free, "constrained": constrained, "ratio": ratio});
    }
    out
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let n_default = if full { 48 } else { 6 };
    let (mut coder, mut n) = (std::env::var("POCKETRT_CODER_GGUF").ok(), n_default);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-n" => {
                n = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("-n needs a number")
            }
            _ => coder = Some(a),
        }
    }
    let coder = coder.expect("the Qwen2.5-Coder GGUF: an argument or $POCKETRT_CODER_GGUF");
    let mut src = pocketrt::format::open(std::path::Path::new(&coder)).unwrap();
    let tokenizer_json = src.tokenizer_json().unwrap().expect("the GGUF's tokenizer");
    let tokenizer = || Tokenizer::from_hf_json(&tokenizer_json).unwrap();
    let mut results = vec![];
    for backend in [Backend::Cpu, Backend::Gpu] {
        let mut synth = SynthSource::preset("pocket-0.3b", 1)
            .unwrap()
            .with_tokenizer(tokenizer_json.clone(), None);
        let engine = Engine::load(&mut synth, backend, WeightMode::Q4, CONTEXT).unwrap();
        let mut s = Session::new(engine, tokenizer(), None);
        results.push(bench("synth:pocket-0.3b", &mut s, n));
    }
    let engine = Engine::load(src.as_mut(), Backend::Cpu, WeightMode::Q4, CONTEXT).unwrap();
    let mut s = Session::new(engine, tokenizer(), None);
    results.push(bench("qwen2.5-coder-0.5b", &mut s, n));
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"constrained_decode": results})).unwrap()
    );
}
