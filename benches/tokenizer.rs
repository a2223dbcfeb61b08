//! Encode throughput on the Qwen3 test corpus (MB/s), next to HF `tokenizers` (Python) on
//! the same corpus in the same run. Prints one JSON object.
//!
//! Data: tests/fixtures/tokenizer/fetch-qwen3-tokenizer (POCKETRT_QWEN3_DIR overrides the
//! cache folder). Run: `cargo bench --bench tokenizer`.

use pocketrt::tokenizer::Tokenizer;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

fn data_dir() -> PathBuf {
    if let Ok(d) = std::env::var("POCKETRT_QWEN3_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var("POCKETRT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/pocketrt")
        });
    cache.join("qwen3-tokenizer")
}

fn main() {
    let dir = data_dir();
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| {
            eprintln!(
                "{}: {e}; run tests/fixtures/tokenizer/fetch-qwen3-tokenizer",
                dir.join(name).display()
            );
            std::process::exit(1)
        })
    };
    let t0 = Instant::now();
    let tok = Tokenizer::from_hf_json(&read("tokenizer.json")).expect("tokenizer.json");
    let load_s = t0.elapsed().as_secs_f64();
    let docs: Vec<String> = read("corpus.jsonl")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("corpus line");
            v["text"].as_str().expect("text").to_string()
        })
        .collect();
    let mb = docs.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    let mut passes = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        for d in &docs {
            std::hint::black_box(tok.encode(d, false));
        }
        passes.push(mb / t.elapsed().as_secs_f64());
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tokenizer/bench_hf.py"
    );
    let hf = Command::new("python3")
        .arg(script)
        .env("POCKETRT_QWEN3_DIR", &dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
    let hf_single = hf
        .as_ref()
        .and_then(|v| v["encode_mb_s_single_thread"].as_f64());
    let ours_first = passes[0];
    let out = serde_json::json!({
        "bench": "tokenizer_encode",
        "corpus_mb": mb,
        "documents": docs.len(),
        "load_s": load_s,
        "pocketrt_mb_s_first_pass": ours_first,
        "pocketrt_mb_s_cached": passes[1..].iter().cloned().fold(0.0, f64::max),
        "hf_tokenizers": hf,
        "ratio_first_pass_vs_hf_single_thread": hf_single.map(|h| ours_first / h),
    });
    println!("{out}");
}
