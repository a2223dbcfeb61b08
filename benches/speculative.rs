//! Speculative decoding (`pocketrt::speculate`) against plain decoding on the real
//! Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (POCKETRT_CODER_GGUF, or `--model PATH`), over
//! three workloads of tests/fixtures/speculative/prompts.json: a code edit (the reply
//! rewrites the given function with one change), a RAG answer quoting a passage, free
//! chat. Per backend and workload, plain and speculative runs alternate (`-r` rounds,
//! the median kept); the greedy texts must be equal. Also the cost of one verification
//! step of n = 1, 2, 4, 8 tokens against one decode step: what a draft costs.
//! Prints one JSON object per line.
//!
//! Run: `cargo bench --bench speculative -- [--backend cpu|gpu|both] [-n TOKENS] [-r
//! ROUNDS] [--draft-max N] [--model PATH]` (default cpu, 128 tokens, 3 rounds). Without
//! `--bench` (the test run's smoke): the CPU backend, 12 tokens, one round of the code
//! edit.

use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::format;
use pocketrt::generate::{reply_options, GenerateOptions, GenerateStats, Session};
use pocketrt::speculate::SpecOptions;
use pocketrt::tokenizer::{ChatTemplate, Message, Tokenizer};
use std::time::Instant;

#[path = "../tests/speculative/prompts.rs"]
mod spec_prompts;
use spec_prompts::prompts;

struct Args {
    backends: Vec<Backend>,
    tokens: usize,
    rounds: usize,
    draft_max: usize,
    model: std::path::PathBuf,
    workloads: Vec<&'static str>,
}

fn parse() -> Result<Args, String> {
    let bench = std::env::args().any(|s| s == "--bench");
    let model = std::env::var_os("POCKETRT_CODER_GGUF").map(Into::into);
    let mut a = Args {
        backends: vec![Backend::Cpu],
        tokens: if bench { 128 } else { 12 },
        rounds: if bench { 3 } else { 1 },
        draft_max: pocketrt::speculate::DEFAULT_DRAFT_MAX,
        model: model.unwrap_or_default(),
        workloads: if bench {
            vec!["code_edit", "rag", "chat"]
        } else {
            vec!["code_edit"]
        },
    };
    let mut it = std::env::args().skip(1).filter(|s| s != "--bench");
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{arg} needs a number"))
        };
        match arg.as_str() {
            "-n" => a.tokens = number(value()?)?,
            "-r" => a.rounds = number(value()?)?.max(1),
            "--draft-max" => a.draft_max = number(value()?)?,
            "--model" => a.model = value()?.into(),
            "--backend" => {
                a.backends = match value()?.as_str() {
                    "cpu" => vec![Backend::Cpu],
                    "gpu" => vec![Backend::Gpu],
                    "both" => vec![Backend::Cpu, Backend::Gpu],
                    other => return Err(format!("--backend {other}: cpu, gpu or both")),
                }
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if a.model.as_os_str().is_empty() {
        return Err("set POCKETRT_CODER_GGUF or pass --model PATH".into());
    }
    Ok(a)
}

fn prompt(workload: &str) -> String {
    let found = prompts().into_iter().find(|p| p.workload == workload);
    found.expect("a prompt per workload").text
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn session(a: &Args, backend: Backend) -> pocketrt::Result<Session> {
    let mut src = format::open(&a.model)?;
    let json = src.tokenizer_json()?.expect("the GGUF has a tokenizer");
    let tokenizer = Tokenizer::from_hf_json(&json)?;
    let template = src
        .chat_template()
        .map(|t| ChatTemplate::new(&t))
        .transpose()?;
    let engine = Engine::load(src.as_mut(), backend, WeightMode::Keep, 2048)?;
    Ok(Session::new(engine, tokenizer, template))
}

/// One generation from an empty cache: its text and stats.
fn run(s: &mut Session, tokens: &[u32], opts: &GenerateOptions) -> (String, GenerateStats) {
    s.rewind(0);
    s.generate(tokens, opts, |_| true).expect("generate")
}

/// Milliseconds of one verification step of `n` tokens at position `at` (best of 3),
/// and of one decode step.
fn step_costs(engine: &mut Engine, prompt: &[u32]) -> (f64, Vec<(usize, f64)>) {
    engine.feed_all(prompt).expect("prompt");
    let at = engine.position();
    let best = |engine: &mut Engine, f: &dyn Fn(&mut Engine)| {
        (0..3)
            .map(|_| {
                engine.rewind(at);
                let t = Instant::now();
                f(engine);
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::MAX, f64::min)
    };
    let step = best(engine, &|e| {
        e.step(prompt[0]).expect("step");
    });
    let verify = [1, 2, 4, 8]
        .into_iter()
        .map(|n| {
            let toks = &prompt[..n];
            (
                n,
                best(engine, &|e| drop(e.verify(toks, false).expect("verify"))),
            )
        })
        .collect();
    (step, verify)
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("speculative: {e}");
            std::process::exit(2);
        }
    };
    for &backend in &a.backends {
        let mut s = session(&a, backend).expect("load");
        let spec = SpecOptions {
            draft_max: a.draft_max,
            ..SpecOptions::lookup()
        };
        for workload in &a.workloads {
            let rendered = s
                .template()
                .expect("a chat template")
                .render(&[Message::user(prompt(workload))], &reply_options());
            let tokens = s.tokenizer().encode(&rendered.expect("render"), true);
            let plain_opts = GenerateOptions {
                max_tokens: a.tokens,
                ..Default::default()
            };
            let spec_opts = GenerateOptions {
                speculative: Some(spec),
                ..plain_opts.clone()
            };
            let (mut plain, mut fast, mut last) = (vec![], vec![], None);
            for _ in 0..a.rounds {
                let (p_text, p) = run(&mut s, &tokens, &plain_opts);
                let (s_text, st) = run(&mut s, &tokens, &spec_opts);
                assert_eq!(s_text, p_text, "{workload}: speculation changed the text");
                plain.push(p.generate_tok_s());
                fast.push(st.generate_tok_s());
                last = Some(st);
            }
            let st = last.expect("a round");
            let (plain, fast) = (median(plain), median(fast));
            let sp = st.speculation;
            println!(
                "{}",
                serde_json::json!({
                    "bench": "speculative",
                    "backend": s.engine().description(),
                    "workload": workload,
                    "tokens": st.generated_tokens,
                    "plain_tok_s": plain,
                    "spec_tok_s": fast,
                    "ratio": fast / plain,
                    "drafted": sp.drafted,
                    "accepted": sp.accepted,
                    "verify_steps": sp.steps,
                    "accepted_per_step": sp.accepted_per_step(),
                    "same_text": true,
                })
            );
        }
        let rendered = s
            .template()
            .expect("template")
            .render(&[Message::user(prompt("rag"))], &reply_options());
        let tokens = s.tokenizer().encode(&rendered.expect("render"), true);
        let description = s.engine().description().to_string();
        drop(s);
        let mut src = format::open(&a.model).expect("open");
        let mut engine = Engine::load(src.as_mut(), backend, WeightMode::Keep, 2048).expect("load");
        let (step, verify) = step_costs(&mut engine, &tokens);
        let verify: serde_json::Map<String, serde_json::Value> = verify
            .into_iter()
            .map(|(n, ms)| (n.to_string(), ms.into()))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "bench": "speculative_step_cost",
                "backend": description,
                "position": tokens.len(),
                "decode_step_ms": step,
                "verify_ms_by_tokens": verify,
            })
        );
    }
}
