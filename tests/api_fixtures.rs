//! The OpenAI protocol end to end: every request fixture in tests/fixtures/api/*.json
//! (a list of requests run in order on one session, and what each must show) runs on a
//! synthetic tiny Qwen3-shaped model — seeded random weights, a byte-level tokenizer, the
//! real Qwen3 chat template — on the CPU oracle (Q4 weights) and on the GPU engine
//! (lavapipe in CI). Checked: each fixture's expectations (errors and their `param`,
//! finish reasons, token counts, KV reuse, stop strings cut where they first occur,
//! logit bias, logprobs), that every response equals its own stream put together, and
//! that both backends give the same responses and chunks for the same seed, greedy and
//! sampled (ids and times aside, logprobs to 1e-2). Nothing compares with generated text
//! written down: expectations refer to other responses of the same fixture.

mod api_common;
mod gpu_common;

use api_common::*;
use pocketrt::cpu::{MemorySource, WeightMode};
use pocketrt::engine::{Backend, Engine};
use pocketrt::generate::Session;
use pocketrt::tokenizer::ChatTemplate;
use serde_json::{json, Value as Json};
use std::sync::OnceLock;

fn session(engine: Engine) -> Session {
    Session::new(
        engine,
        tokenizer(),
        Some(ChatTemplate::new(TEMPLATE).unwrap()),
    )
}

fn model() -> MemorySource {
    weights(config(), 1.0).unwrap()
}

fn cpu() -> Session {
    session(Engine::load(&mut model(), Backend::Reference, WeightMode::Q4, CONTEXT).unwrap())
}

fn gpu() -> Session {
    session(Engine::load_on_gpu(gpu_common::gpu().clone(), &mut model(), CONTEXT).unwrap())
}

fn cpu_outcomes() -> &'static Vec<(Fixture, Vec<Outcome>)> {
    static ALL: OnceLock<Vec<(Fixture, Vec<Outcome>)>> = OnceLock::new();
    ALL.get_or_init(|| run_all(cpu()))
}

/// The stream put together: (content, reasoning, tool calls as (name, arguments)).
fn assembled(o: &Outcome) -> (String, String, Vec<(String, String)>) {
    let (mut content, mut reasoning, mut calls) = (String::new(), String::new(), vec![]);
    for chunk in &o.chunks {
        for c in chunk["choices"].as_array().unwrap() {
            let d = &c["delta"];
            content.push_str(d["content"].as_str().or(c["text"].as_str()).unwrap_or(""));
            reasoning.push_str(d["reasoning_content"].as_str().unwrap_or(""));
            for t in d["tool_calls"].as_array().into_iter().flatten() {
                if let Some(name) = t["function"]["name"].as_str() {
                    calls.push((name.to_string(), String::new()));
                }
                let args = t["function"]["arguments"].as_str().unwrap_or("");
                calls
                    .last_mut()
                    .expect("a call's first delta names it")
                    .1
                    .push_str(args);
            }
        }
    }
    (content, reasoning, calls)
}

/// What every successful response shows, whatever the fixture.
fn check_shape(what: &str, o: &Outcome) {
    let r = &o.response;
    let chat = r["object"] == "chat.completion";
    assert!(chat || r["object"] == "text_completion", "{what}: {r}");
    let prefix = if chat { "chatcmpl-" } else { "cmpl-" };
    assert!(r["id"].as_str().unwrap().starts_with(prefix), "{what}");
    let u = &r["usage"];
    assert_eq!(
        u["total_tokens"].as_u64(),
        Some(u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()),
        "{what}"
    );
    let (content, reasoning, calls) = assembled(o);
    let choice = &r["choices"][0];
    if chat {
        let m = &choice["message"];
        assert_eq!(
            content,
            m["content"].as_str().unwrap_or(""),
            "{what}: stream vs message"
        );
        assert_eq!(
            reasoning.trim_end(),
            m["reasoning_content"].as_str().unwrap_or(""),
            "{what}"
        );
        let want: Vec<(String, String)> = m["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["function"]["name"].as_str().unwrap().into(),
                    c["function"]["arguments"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(calls, want, "{what}");
        assert_eq!(
            o.chunks[0]["choices"][0]["delta"]["role"], "assistant",
            "{what}"
        );
    } else {
        let echo = r["choices"][0]["text"].as_str().unwrap();
        assert!(echo.ends_with(&content), "{what}: stream vs text");
    }
    // The finish reason comes in the last chunk with choices; usage in a last chunk of
    // its own exactly when asked for.
    let with_choices: Vec<&Json> = o
        .chunks
        .iter()
        .filter(|c| !c["choices"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(
        with_choices.last().unwrap()["choices"][0]["finish_reason"],
        choice["finish_reason"],
        "{what}"
    );
    let usage_chunks: Vec<&Json> = o
        .chunks
        .iter()
        .filter(|c| c.get("usage").is_some())
        .collect();
    match usage_chunks.as_slice() {
        [] => {}
        [last] => {
            assert_eq!(last["usage"], r["usage"], "{what}");
            assert!(
                std::ptr::eq(*last, o.chunks.last().unwrap()),
                "{what}: usage chunk is last"
            );
        }
        _ => panic!("{what}: several usage chunks"),
    }
}

/// The fixture's expectations for request `i`.
fn check_expect(what: &str, e: &Json, i: usize, all: &[Outcome], requests: &[Json]) {
    let o = &all[i];
    let r = &o.response;
    if let Some(err) = e.get("error") {
        assert!(
            r.get("error").is_some(),
            "{what}: expected an error, got {r}"
        );
        for key in ["param", "code", "type"] {
            if let Some(want) = err.get(key) {
                assert_eq!(&r["error"][key], want, "{what}: error {key}: {r}");
            }
        }
        return;
    }
    assert!(r.get("error").is_none(), "{what}: {r}");
    check_shape(what, o);
    let choice = &r["choices"][0];
    let usage = &r["usage"];
    let count = |k: &str| usage[k].as_u64().unwrap() as usize;
    if let Some(want) = e.get("finish_reason") {
        assert_eq!(&choice["finish_reason"], want, "{what}");
    }
    if let Some(want) = e.get("completion_tokens") {
        assert_eq!(usage["completion_tokens"], *want, "{what}");
    }
    if let Some(j) = e.get("cached_prompt_of").and_then(Json::as_u64) {
        let earlier = all[j as usize].response["usage"]["prompt_tokens"]
            .as_u64()
            .unwrap() as usize;
        let cached = usage["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap() as usize;
        assert!(
            cached >= earlier - 1,
            "{what}: {cached} cached, request {j} had {earlier}"
        );
    }
    if let Some(max) = e.get("prompt_tokens_max").and_then(Json::as_u64) {
        assert!(count("prompt_tokens") <= max as usize, "{what}: {usage}");
    }
    if let Some(j) = e.get("longer_prompt_than").and_then(Json::as_u64) {
        let other = all[j as usize].response["usage"]["prompt_tokens"]
            .as_u64()
            .unwrap() as usize;
        assert!(count("prompt_tokens") > other, "{what}: {usage} vs {other}");
    }
    if let Some(chars) = e.get("content_chars").and_then(Json::as_str) {
        let c = o.content();
        assert!(
            !c.is_empty() && c.chars().all(|x| chars.contains(x)),
            "{what}: {c:?}"
        );
    }
    if let Some(j) = e.get("same_as").and_then(Json::as_u64) {
        assert_eq!(o.content(), all[j as usize].content(), "{what}");
    }
    if let Some(j) = e.get("differs_from").and_then(Json::as_u64) {
        assert_ne!(o.content(), all[j as usize].content(), "{what}");
    }
    if let Some(j) = e.get("stopped_at").and_then(Json::as_u64) {
        // The reply is request j's cut before the first occurrence of any stop string.
        let full = all[j as usize].content();
        let stops: Vec<String> = match &requests[i]["stop"] {
            Json::String(s) => vec![s.clone()],
            Json::Array(a) => a.iter().map(|s| s.as_str().unwrap().to_string()).collect(),
            other => panic!("{what}: stop {other}"),
        };
        let stops: Vec<String> = stops
            .iter()
            .map(|s| substitute(&json!(s), all).as_str().unwrap().to_string())
            .collect();
        let cut = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| full.find(s.as_str()))
            .min()
            .expect("a stop string occurs");
        assert_eq!(
            o.content(),
            full[..cut],
            "{what}: stops {stops:?} in {full:?}"
        );
        assert_eq!(choice["finish_reason"], "stop", "{what}");
        for s in &stops {
            assert!(
                !assembled(o).0.contains(s.as_str()),
                "{what}: {s:?} leaked into the stream"
            );
        }
    }
    if let Some(n) = e.get("top_logprobs").and_then(Json::as_u64) {
        let lp = choice["logprobs"]["content"]
            .as_array()
            .expect("logprobs.content");
        assert_eq!(
            lp.len(),
            count("completion_tokens"),
            "{what}: one entry per token"
        );
        for t in lp {
            let top = t["top_logprobs"].as_array().unwrap();
            assert_eq!(top.len(), n as usize, "{what}");
            let p = t["logprob"].as_f64().unwrap();
            assert!(
                p <= 0.0 && top.iter().all(|a| a["logprob"].as_f64().unwrap() <= 0.0),
                "{what}"
            );
            if e.get("greedy") == Some(&json!(true)) {
                assert_eq!(
                    top[0]["token"], t["token"],
                    "{what}: greedy takes the most likely"
                );
            }
        }
        let streamed: usize = o
            .chunks
            .iter()
            .flat_map(|c| c["choices"].as_array().unwrap())
            .map(|c| c["logprobs"]["content"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(streamed, lp.len(), "{what}: streamed logprobs");
    }
    if e.get("no_reasoning") == Some(&json!(true)) {
        assert!(
            choice["message"].get("reasoning_content").is_none(),
            "{what}"
        );
    }
}

#[test]
fn request_fixtures_hold_on_the_cpu_oracle() {
    let all = cpu_outcomes();
    assert!(all.len() >= 20, "{} fixtures", all.len());
    let (mut errors, mut runs, mut failed) = (0, 0, vec![]);
    for (f, outcomes) in all {
        let requests = f.doc["requests"].as_array().unwrap();
        let expects = f.doc["expect"].as_array().unwrap();
        assert_eq!(
            expects.len(),
            requests.len(),
            "{}: one expectation per request",
            f.name
        );
        for (i, e) in expects.iter().enumerate() {
            let what = format!("{}[{i}]", f.name);
            // Every fixture is checked; the failures are listed together at the end.
            let check = || check_expect(&what, e, i, outcomes, requests);
            if std::panic::catch_unwind(check).is_err() {
                failed.push(what.clone());
            }
            if e.get("error").is_some() {
                errors += 1;
            } else {
                runs += 1;
            }
        }
        println!(
            "{}: {}",
            f.name,
            outcomes
                .iter()
                .map(|o| o.content())
                .collect::<Vec<_>>()
                .join(" | ")
                .escape_debug()
        );
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
    assert!(
        errors >= 8 && runs >= 20,
        "{errors} bad requests, {runs} runs"
    );
}

#[test]
fn gpu_gives_the_cpu_oracles_responses_and_chunks() {
    let mut failed = vec![];
    for ((f, got), (_, want)) in run_all(gpu()).iter().zip(cpu_outcomes()) {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let (g_r, w_r) = (normalized(&g.response), normalized(&w.response));
            let (g_c, w_c) = (normalized(&json!(g.chunks)), normalized(&json!(w.chunks)));
            if !same(&g_r, &w_r) || !same(&g_c, &w_c) {
                println!("{}[{i}]: GPU\n{g_r}\nCPU\n{w_r}", f.name);
                failed.push(format!("{}[{i}]", f.name));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "the GPU differs from the CPU oracle in {failed:?}"
    );
}
