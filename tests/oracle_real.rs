//! The CPU oracle on the real Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (491 MB, never
//! committed) against llama.cpp's greedy continuations, recorded in
//! tests/fixtures/oracle/llamacpp/reference.json by make_reference.py (llama.cpp from the
//! llama-cpp-python 0.3.36 sdist, CPU).
//!
//! The model path comes from POCKETRT_CODER_GGUF (scripts/test sets it after running
//! scripts/fetch-test-models); without it these tests fail rather than skip.
//!
//! - f32 mode (every weight dequantized to f32): the greedy continuation of
//!   `def fibonacci(n):` equals llama.cpp's for at least the first 24 tokens; so do the
//!   other reference prompts.
//! - Q4 g64 mode (every matrix requantized to Q4 g64): reports how many of the 24 tokens
//!   match, and checks the decoded text is still the Python function it should be.

mod real_data;

use real_data::coder_gguf;
use std::time::Instant;

use pocketrt::convert::{convert, ConvertOptions};
use pocketrt::cpu::{Model, WeightMode};
use pocketrt::format::gguf_source::GgufSource;
use pocketrt::format::package_source::PackageSource;
use pocketrt::format::ModelSource;
use pocketrt::quant::{MergeStats, WeightFormat};
use pocketrt::tokenizer::Tokenizer;

/// Tokens that must match llama.cpp exactly.
const MATCH_TOKENS: usize = 24;
/// Tokens generated (and compared, reported) per prompt.
const GENERATE: usize = 32;

struct Case {
    prompt: String,
    prompt_ids: Vec<u32>,
    generated_ids: Vec<u32>,
    generated_text: String,
}

fn reference() -> Vec<Case> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/oracle/llamacpp/reference.json"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ids = |x: &serde_json::Value| -> Vec<u32> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap() as u32)
            .collect()
    };
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            prompt: c["prompt"].as_str().unwrap().to_string(),
            prompt_ids: ids(&c["prompt_ids"]),
            generated_ids: ids(&c["generated_ids"]),
            generated_text: c["generated_text"].as_str().unwrap().to_string(),
        })
        .collect()
}

fn load(mode: WeightMode) -> (Model, Tokenizer) {
    let start = Instant::now();
    let mut src = GgufSource::open(&coder_gguf()).unwrap();
    let tokenizer = Tokenizer::from_gguf(src.gguf()).unwrap();
    let model = Model::load(&mut src, mode).unwrap();
    println!("{mode:?}: loaded in {:.1} s", start.elapsed().as_secs_f64());
    (model, tokenizer)
}

/// Greedy continuation, printing its speed (prompt and generated tokens are each one
/// forward step here, so tok/s counts both).
fn timed_greedy(model: &Model, prompt: &[u32], n: usize) -> Vec<u32> {
    let start = Instant::now();
    let out = model.greedy(prompt, n).unwrap();
    let secs = start.elapsed().as_secs_f64();
    let steps = prompt.len() + n - 1;
    println!(
        "  {steps} forward steps in {secs:.1} s: {:.2} tok/s",
        steps as f64 / secs
    );
    out
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[test]
fn tokenizer_encodes_the_reference_prompts_like_llama_cpp() {
    let src = GgufSource::open(&coder_gguf()).unwrap();
    let tokenizer = Tokenizer::from_gguf(src.gguf()).unwrap();
    for case in reference() {
        assert_eq!(
            tokenizer.encode(&case.prompt, true),
            case.prompt_ids,
            "{:?}",
            case.prompt
        );
    }
}

#[test]
fn f32_oracle_continues_each_prompt_token_for_token_like_llama_cpp() {
    let (model, tokenizer) = load(WeightMode::F32);
    assert_continues_like_llama_cpp(&model, &tokenizer);
}

/// Each reference prompt's greedy continuation equals llama.cpp's for MATCH_TOKENS tokens.
fn assert_continues_like_llama_cpp(model: &Model, tokenizer: &Tokenizer) {
    let cases = reference();
    assert_eq!(cases[0].prompt, "def fibonacci(n):");
    let mut failures = vec![];
    for case in &cases {
        println!("{:?}", case.prompt);
        let got = timed_greedy(model, &case.prompt_ids, GENERATE);
        let same = common_prefix(&got, &case.generated_ids);
        let text = tokenizer.decode(&got, false).unwrap();
        println!("  matches llama.cpp for {same}/{GENERATE} tokens: {text:?}");
        if same < MATCH_TOKENS {
            failures.push(format!(
                "{:?}: only the first {same} tokens match llama.cpp\n  oracle:    {got:?}\n  \
                 llama.cpp: {:?}\n  llama.cpp text: {:?}",
                case.prompt, case.generated_ids, case.generated_text
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `--weights keep`: the coder's Q5_0 and Q8_0 matrices are kept exactly as Q8 g32, its
/// Q4_K and Q6_K ones quantized to Q8 g32; the package read back with the oracle continues
/// every prompt as llama.cpp does (Q4 g64 does not: see the test below).
#[test]
fn keep_package_keeps_q8_0_and_q5_0_exactly_and_continues_like_llama_cpp() {
    let mut src = GgufSource::open(&coder_gguf()).unwrap();
    let groups = |types: &[&str]| -> u64 {
        let matrices = src.tensors().iter().filter(|t| t.shape.len() == 2);
        let of_type = matrices.filter(|t| types.contains(&t.dtype.as_str()));
        of_type
            .map(|t| t.shape.iter().product::<usize>() as u64 / 32)
            .sum()
    };
    let (exact, requantized) = (groups(&["Q5_0", "Q8_0"]), groups(&["Q4_K", "Q6_K"]));
    assert!(exact > 0 && requantized > 0);
    let dir = std::env::temp_dir().join(format!("pocketrt-keep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = ConvertOptions {
        weights: WeightFormat::Keep,
        ..ConvertOptions::default()
    };
    let start = Instant::now();
    let report = convert(&mut src, &dir, &opts, &mut |_| {}).unwrap();
    let q4_bytes = pocketrt::convert::package_bytes(src.config()).unwrap();
    println!(
        "keep: converted in {:.1} s, {:.1} MB ({:.2}x the Q4 package's {:.1} MB); q8 {:?}",
        start.elapsed().as_secs_f64(),
        report.package_bytes as f64 / 1e6,
        report.package_bytes as f64 / q4_bytes as f64,
        q4_bytes as f64 / 1e6,
        report.merge_q8
    );
    assert_eq!(report.merge_q8.groups_exact, exact);
    assert_eq!(report.merge_q8.groups_requantized, requantized);
    assert_eq!(
        report.merge,
        MergeStats::default(),
        "no Q4 tensor in this file"
    );
    let mut pkg = PackageSource::open(&dir).unwrap();
    let q8 = pkg.tensors().iter().filter(|t| t.dtype == "q8g32").count();
    assert_eq!(
        q8,
        src.tensors().iter().filter(|t| t.shape.len() == 2).count()
    );
    let model = Model::load(&mut pkg, WeightMode::Keep).unwrap();
    let tokenizer = Tokenizer::from_gguf(src.gguf()).unwrap();
    assert_continues_like_llama_cpp(&model, &tokenizer);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn q4_oracle_still_writes_the_fibonacci_function() {
    let (model, tokenizer) = load(WeightMode::Q4);
    let case = &reference()[0];
    let got = timed_greedy(&model, &case.prompt_ids, MATCH_TOKENS);
    let same = got
        .iter()
        .zip(&case.generated_ids)
        .filter(|(a, b)| a == b)
        .count();
    let prefix = common_prefix(&got, &case.generated_ids);
    let text = tokenizer.decode(&got, false).unwrap();
    println!(
        "Q4 g64: {same}/{MATCH_TOKENS} tokens equal the f32 / llama.cpp continuation \
         (first {prefix} in a row): {text:?}"
    );
    // Plausible Python: the body starts on a new line (after optional spaces), every
    // line of it is indented by a multiple of four spaces, and it tests n and returns.
    let body = text
        .trim_start_matches(' ')
        .strip_prefix('\n')
        .unwrap_or_else(|| panic!("no body on a new line: {text:?}"));
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        let indent = line.len() - line.trim_start_matches(' ').len();
        assert!(
            indent >= 4 && indent % 4 == 0,
            "badly indented line {line:?} in {text:?}"
        );
    }
    for needle in ["if n", "return"] {
        assert!(body.contains(needle), "Q4 text lacks {needle:?}: {text:?}");
    }
}
