//! llama.cpp's tokenizer test vectors (`ggml-vocab-{qwen2,gpt-2}.gguf` + `.inp`/`.out`,
//! whose expected ids come from HF `tokenizers`) must pass 100 %, both with the tokenizer
//! loaded from GGUF and with its exported tokenizer.json loaded back.
//!
//! Data: `scripts/fetch-test-models vocab` extracts them into ~/.cache/pocketrt/llama-vocab;
//! POCKETRT_VOCAB_DIR points elsewhere. Missing data is a failure, not a skip.

use pocketrt::format::gguf::Gguf;
use pocketrt::tokenizer::{describe_tokens, Tokenizer};
use std::path::PathBuf;

fn vocab_dir() -> PathBuf {
    if let Ok(d) = std::env::var("POCKETRT_VOCAB_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var("POCKETRT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/pocketrt")
        });
    cache.join("llama-vocab")
}

fn read(name: &str) -> Vec<u8> {
    let path = vocab_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\nllama.cpp's vocab test files are missing: run `scripts/fetch-test-models \
             vocab` (or set POCKETRT_VOCAB_DIR to a folder holding them)",
            path.display()
        )
    })
}

/// (text, expected ids) pairs: `.inp` holds the texts, each followed by
/// "\n__ggml_vocab_test__\n"; `.out` one line of space-separated ids per text.
fn vectors(vocab: &str) -> Vec<(String, Vec<u32>)> {
    let inp = String::from_utf8(read(&format!("ggml-vocab-{vocab}.gguf.inp"))).unwrap();
    let out = String::from_utf8(read(&format!("ggml-vocab-{vocab}.gguf.out"))).unwrap();
    let mut texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    assert_eq!(
        texts.pop(),
        Some(""),
        "the .inp file does not end with a separator"
    );
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(
        texts.len(),
        ids.len(),
        "{vocab}: .inp and .out disagree on the test count"
    );
    texts.into_iter().map(String::from).zip(ids).collect()
}

fn check(vocab: &str, tok: &Tokenizer, how: &str) -> usize {
    let cases = vectors(vocab);
    let mut failures = Vec::new();
    for (text, want) in &cases {
        let got = tok.encode(text, false);
        if &got != want {
            failures.push(format!(
                "{text:?}\n  ours: {:?}\n  want: {:?}",
                describe_tokens(tok, &got),
                describe_tokens(tok, want)
            ));
        } else {
            assert_eq!(
                &tok.decode(&got, false).unwrap(),
                text,
                "round trip of {text:?}"
            );
        }
    }
    eprintln!(
        "{vocab} ({how}): {}/{} vectors pass",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{vocab} ({how}): {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    cases.len()
}

fn gguf_tokenizer(vocab: &str) -> Tokenizer {
    let bytes = read(&format!("ggml-vocab-{vocab}.gguf"));
    let g = Gguf::parse(&bytes).expect("parse the vocab GGUF");
    Tokenizer::from_gguf(&g).expect("tokenizer from GGUF")
}

#[test]
fn llama_cpp_qwen2_vectors_pass_from_gguf_and_exported_json() {
    let tok = gguf_tokenizer("qwen2");
    let n = check("qwen2", &tok, "GGUF");
    assert!(n >= 40);
    let again = Tokenizer::from_hf_json(&tok.to_hf_json()).expect("reload the export");
    check("qwen2", &again, "GGUF → tokenizer.json");
}

#[test]
fn llama_cpp_gpt2_vectors_pass_from_gguf_and_exported_json() {
    let tok = gguf_tokenizer("gpt-2");
    let n = check("gpt-2", &tok, "GGUF");
    assert!(n >= 40);
    let again = Tokenizer::from_hf_json(&tok.to_hf_json()).expect("reload the export");
    check("gpt-2", &again, "GGUF → tokenizer.json");
}
