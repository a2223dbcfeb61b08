//! The OpenAI request fixtures (tests/fixtures/api/*.json), how they run on a [`Session`],
//! and the tiny Qwen3-shaped model they run on (the oracle fixture's shape, seeded random
//! weights, a byte-level tokenizer, the real Qwen3 chat template): shared by
//! tests/api_fixtures.rs (CPU oracle vs GPU) and examples/web_fixture.rs (the native
//! outcomes the browser tests compare with).
#![allow(dead_code)] // each includer uses its part

use pocketrt::api::{ChatCompletionRequest, CompletionRequest};
use pocketrt::config::ModelConfig;
use pocketrt::cpu::MemorySource;
use pocketrt::format::open;
use pocketrt::generate::Session;
use pocketrt::tokenizer::{byte_level_json, Tokenizer};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

pub const CONTEXT: usize = 2048;
pub const TEMPLATE: &str = include_str!("../fixtures/tokenizer/qwen3_chat_template.jinja");
/// Byte tokens, the chat markers, and spare specials up to a vocabulary of 320.
pub const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
pub const VOCAB: usize = 320;

/// The oracle fixture's Qwen3 shape (tests/fixtures/oracle/qwen3) with this test's
/// vocabulary and context.
pub fn config() -> ModelConfig {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oracle/qwen3");
    let shape = open(&dir).unwrap().config().clone();
    ModelConfig {
        vocab_size: VOCAB,
        max_context: CONTEXT,
        eos_token_ids: vec![],
        ..shape
    }
}

/// The tokenizer.json: byte tokens, the chat markers, spare specials up to [`VOCAB`].
pub fn tokenizer_json() -> String {
    let spare: Vec<String> = (SPECIALS.len() + 256..VOCAB)
        .map(|i| format!("<|spare_{i}|>"))
        .collect();
    let mut specials: Vec<&str> = SPECIALS.to_vec();
    specials.extend(spare.iter().map(String::as_str));
    byte_level_json(&specials)
}

/// The tokenizer, ending replies at `<|im_end|>`.
pub fn tokenizer() -> Tokenizer {
    let mut tok = Tokenizer::from_hf_json(&tokenizer_json()).unwrap();
    let im_end = tok.token_to_id("<|im_end|>").unwrap();
    tok.set_eos_ids(vec![im_end]).unwrap();
    tok
}

/// The model's weights (seeded) for `config`.
pub fn weights(config: ModelConfig, scale: f32) -> pocketrt::Result<MemorySource> {
    MemorySource::random(config, 25, scale)
}

pub struct Fixture {
    pub name: String,
    pub doc: Json,
}

pub fn fixtures() -> Vec<Fixture> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/api");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !name(p).ends_with("_expected"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| Fixture {
            name: name(p),
            doc: serde_json::from_str(&std::fs::read_to_string(p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        })
        .collect()
}

pub fn name(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

/// One request's outcome: the response (or the error) and the stream's chunks.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub response: Json,
    pub chunks: Vec<Json>,
}

impl Outcome {
    pub fn content(&self) -> String {
        let c = &self.response["choices"][0];
        c["message"]["content"]
            .as_str()
            .or(c["text"].as_str())
            .unwrap_or("")
            .to_string()
    }
}

/// `"$reply{i}"` → response i's text; `"$reply{i}[a..b]"` → its characters a..b.
pub fn substitute(v: &Json, done: &[Outcome]) -> Json {
    match v {
        Json::String(s) if s.starts_with("$reply") => {
            let rest = &s["$reply".len()..];
            let (i, range) = rest.split_once('[').unwrap_or((rest, ""));
            let text = done[i.parse::<usize>().unwrap()].content();
            let Some((a, b)) = range.trim_end_matches(']').split_once("..") else {
                return text.into();
            };
            let chars: Vec<char> = text.chars().collect();
            let (a, b) = (a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap());
            assert!(
                b <= chars.len(),
                "{s}: reply {i} is {} characters",
                chars.len()
            );
            chars[a..b].iter().collect::<String>().into()
        }
        Json::Array(a) => a.iter().map(|x| substitute(x, done)).collect(),
        Json::Object(o) => o
            .iter()
            .map(|(k, x)| (k.clone(), substitute(x, done)))
            .collect(),
        other => other.clone(),
    }
}

pub fn run_fixture(s: &mut Session, f: &Fixture) -> Vec<Outcome> {
    let mut done: Vec<Outcome> = vec![];
    let completion = f.doc["kind"] == "completion";
    for req in f.doc["requests"].as_array().unwrap() {
        let req = substitute(req, &done);
        let mut chunks = vec![];
        let response = if completion {
            CompletionRequest::from_value(req).and_then(|r| {
                s.completion(&r, |c| {
                    chunks.push(serde_json::to_value(c).unwrap());
                    true
                })
                .map(|r| serde_json::to_value(r).unwrap())
            })
        } else {
            ChatCompletionRequest::from_value(req).and_then(|r| {
                s.chat_completion(&r, |c| {
                    chunks.push(serde_json::to_value(c).unwrap());
                    true
                })
                .map(|r| serde_json::to_value(r).unwrap())
            })
        };
        let response = response.unwrap_or_else(|e| serde_json::to_value(e).unwrap());
        done.push(Outcome { response, chunks });
    }
    done
}

/// Every fixture in order on one session of `backend` (so later fixtures also meet a
/// cache that earlier ones left).
pub fn run_all(mut s: Session) -> Vec<(Fixture, Vec<Outcome>)> {
    fixtures()
        .into_iter()
        .map(|f| {
            let out = run_fixture(&mut s, &f);
            (f, out)
        })
        .collect()
}

/// Ids, times and timings removed (they differ run to run).
pub fn normalized(v: &Json) -> Json {
    match v {
        Json::Object(o) => o
            .iter()
            .filter(|(k, _)| !["id", "created", "timings"].contains(&k.as_str()))
            .map(|(k, x)| (k.clone(), normalized(x)))
            .collect(),
        Json::Array(a) => a.iter().map(normalized).collect(),
        other => other.clone(),
    }
}

/// Equal, numbers with a fraction (logprobs) to 1e-2.
pub fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) if x.is_f64() || y.is_f64() => {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() <= 1e-2
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
