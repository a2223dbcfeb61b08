//! Structured output end to end on the tiny random model of the API fixtures (seeded
//! weights, byte-level tokenizer): for 12 real-world-shaped JSON Schemas (a tool call, a
//! form, nested objects, arrays, enums, optional fields, bounded numbers, string
//! patterns, `$ref`, `anyOf`) and for regexes and Lark grammars (a date, a CSV row,
//! arithmetic), 20 seeds each at temperature 1 through `/v1/completions`: every output
//! ends by itself (end of sequence allowed only when the grammar accepts) and is valid,
//! checked by tools we did not write (the `jsonschema` PyPI package, Python's `re`,
//! `ast` and `csv`: tests/fixtures/constrained/validate.py). The GPU engine (lavapipe)
//! and the CPU fast backend give the oracle's outputs for the same seeds. Pathological
//! schemas fail fast with a typed error instead of hanging.

mod api_common;
mod gpu_common;

use api_common::*;
use pocketrt::api::CompletionRequest;
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::generate::Session;
use serde_json::{json, Value as Json};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

const SEEDS: u64 = 20;

fn fixture(name: &str) -> Json {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/constrained")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn session(backend: Option<Backend>) -> Session {
    let mut m = weights(config(), 1.0).unwrap();
    let engine = match backend {
        Some(b) => Engine::load(&mut m, b, WeightMode::Q4, CONTEXT).unwrap(),
        None => Engine::load_on_gpu(gpu_common::gpu().clone(), &mut m, CONTEXT).unwrap(),
    };
    Session::new(engine, tokenizer(), None)
}

/// (kind, name, spec, the request's constraint field).
fn cases() -> Vec<(&'static str, String, Json, (&'static str, Json))> {
    let mut out = vec![];
    for (name, schema) in fixture("schemas.json").as_object().unwrap() {
        let format = json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": true}});
        out.push((
            "schema",
            name.clone(),
            schema.clone(),
            ("response_format", format),
        ));
    }
    for (name, grammar) in fixture("grammars.json").as_object().unwrap() {
        out.push((
            "grammar",
            name.clone(),
            grammar.clone(),
            ("grammar", grammar.clone()),
        ));
    }
    out
}

/// The completion of `case` for `seed`: (text, finish reason).
fn complete(s: &mut Session, field: &(&str, Json), seed: u64) -> (String, String) {
    let mut req =
        json!({"prompt": "Output: ", "temperature": 1.0, "seed": seed, "max_tokens": 400});
    req[field.0] = field.1.clone();
    text_and_finish(s, req)
}

/// Failures validate.py reports for `checked` ([{kind, name, spec, output}]).
fn python_failures(checked: &[Json]) -> Vec<String> {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/constrained/validate.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 (tests/requirements.txt: jsonschema)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json!(checked).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "validate.py failed (is jsonschema installed?)"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn every_sampled_output_is_valid_and_the_backends_agree() {
    let cases = cases();
    assert!(cases.iter().filter(|c| c.0 == "schema").count() >= 10);
    let mut oracle = session(Some(Backend::Reference));
    let t0 = Instant::now();
    let (mut checked, mut outputs, mut unfinished) = (vec![], vec![], vec![]);
    for (kind, name, spec, field) in &cases {
        for seed in 0..SEEDS {
            let (text, finish) = complete(&mut oracle, field, seed);
            if finish != "stop" {
                unfinished.push(format!("{name} seed {seed}: {finish}: {text:?}"));
            }
            checked.push(json!({"kind": kind, "name": name, "spec": spec, "output": text}));
            outputs.push(text);
        }
    }
    println!(
        "{} constrained completions on the oracle in {:.1} s",
        outputs.len(),
        t0.elapsed().as_secs_f64()
    );
    // The CPU fast backend (int8 activations: its text is its own) is checked the same way.
    let mut fast = session(Some(Backend::Cpu));
    for (kind, name, spec, field) in &cases {
        for seed in 0..3 {
            let (text, finish) = complete(&mut fast, field, seed);
            if finish != "stop" {
                unfinished.push(format!("cpu {name} seed {seed}: {finish}: {text:?}"));
            }
            checked.push(json!({"kind": kind, "name": name, "spec": spec, "output": text}));
        }
    }
    assert!(
        unfinished.is_empty(),
        "did not end by themselves: {unfinished:#?}"
    );
    let failures = python_failures(&checked);
    assert!(failures.is_empty(), "invalid outputs: {failures:#?}");
    // Outputs differ between seeds (the sampling is not collapsed by the mask).
    let distinct: std::collections::HashSet<_> = outputs.iter().collect();
    assert!(
        distinct.len() > outputs.len() / 2,
        "{} distinct of {}",
        distinct.len(),
        outputs.len()
    );
    // The GPU (masked argmax, masked top-k, or the mask on read-back logits): the oracle's
    // greedy text exactly, and its sampled text for the first seeds; the logits round
    // differently, so a sampled draw at a near-tie may go the other way (at most 1 in 10
    // outputs, and only after a common start).
    let greedy = oracle_greedy(&mut oracle, &cases);
    {
        let (label, mut s) = ("gpu", session(None));
        let (mut differ, mut flips) = (vec![], vec![]);
        for (i, (_, name, _, field)) in cases.iter().enumerate() {
            let (text, _) = complete_greedy(&mut s, field);
            if text != greedy[i] {
                differ.push(format!("{name} greedy: {text:?} vs {:?}", greedy[i]));
            }
            for seed in 0..3 {
                let (text, _) = complete(&mut s, field, seed);
                let want = &outputs[i * SEEDS as usize + seed as usize];
                if &text != want {
                    let common = text
                        .chars()
                        .zip(want.chars())
                        .take_while(|(a, b)| a == b)
                        .count();
                    flips.push((common, format!("{name} seed {seed}: {text:?} vs {want:?}")));
                }
            }
        }
        println!(
            "{label}: {} sampled outputs of {} differ: {flips:#?}",
            flips.len(),
            cases.len() * 3
        );
        assert!(
            differ.is_empty(),
            "{label} greedy differs from the oracle: {differ:#?}"
        );
        assert!(flips.len() * 10 <= cases.len() * 3, "{label}: {flips:#?}");
        assert!(
            flips.iter().all(|(common, _)| *common >= 3),
            "{label}: {flips:#?}"
        );
    }
}

/// The greedy completion of every case on the oracle.
/// Run the completion request `req`: (text, finish reason).
fn text_and_finish(s: &mut Session, req: Json) -> (String, String) {
    let req = CompletionRequest::from_value(req).unwrap();
    let r = serde_json::to_value(s.completion(&req, |_| true).unwrap()).unwrap();
    let c = &r["choices"][0];
    (
        c["text"].as_str().unwrap().to_string(),
        c["finish_reason"].as_str().unwrap().to_string(),
    )
}

fn oracle_greedy(s: &mut Session, cases: &[(&str, String, Json, (&str, Json))]) -> Vec<String> {
    cases.iter().map(|c| complete_greedy(s, &c.3).0).collect()
}

fn complete_greedy(s: &mut Session, field: &(&str, Json)) -> (String, String) {
    let mut req = json!({"prompt": "Output: ", "temperature": 0, "max_tokens": 400});
    req[field.0] = field.1.clone();
    text_and_finish(s, req)
}

#[test]
fn pathological_schemas_fail_fast_or_compile_within_limits() {
    let mut s = session(Some(Backend::Reference));
    let mut deep = json!({"type": "integer", "minimum": 0, "maximum": 9});
    for _ in 0..300 {
        deep = json!({"type": "object", "properties": {"a": deep}, "required": ["a"], "additionalProperties": false});
    }
    let huge_enum: Vec<String> = (0..200_000).map(|i| format!("value_{i}")).collect();
    let huge =
        json!({"type": "object", "properties": {"v": {"enum": huge_enum}}, "required": ["v"]});
    let many_patterns = json!({"type": "object", "properties": (0..3000).map(|i| (format!("k{i}"), json!({"type": "string", "pattern": format!("^(a|b)*c{{{i}}}$")}))).collect::<serde_json::Map<_, _>>()});
    for (what, schema) in [
        ("deep", deep),
        ("huge enum", huge),
        ("many patterns", many_patterns),
    ] {
        let t0 = Instant::now();
        let req = json!({"prompt": "x", "max_tokens": 4, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}});
        let r = s.completion(&CompletionRequest::from_value(req).unwrap(), |_| true);
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "{what}: {:.2} s: {}",
            secs,
            match &r {
                Ok(_) => "ran".into(),
                Err(e) => e.error.message.clone(),
            }
        );
        assert!(secs < 20.0, "{what} took {secs:.1} s");
        // Rejected when compiled (naming the field), or past a per-step limit at the
        // first steps (an error, the generation ended).
        let e = r.expect_err(what);
        let compiled = e.error.param.as_deref() == Some("response_format.json_schema.schema");
        assert!(
            compiled || e.error.message.contains("grammar"),
            "{what}: {e:?}"
        );
    }
}
