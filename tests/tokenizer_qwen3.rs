//! The real Qwen3 tokenizer.json against HF `tokenizers` on a >= 1 MB mixed corpus.
//!
//! Data: `tests/fixtures/tokenizer/fetch-qwen3-tokenizer` caches tokenizer.json and
//! corpus.jsonl (documents + the ids HF `tokenizers` gives them) in
//! ~/.cache/pocketrt/qwen3-tokenizer; POCKETRT_QWEN3_DIR points elsewhere. Missing data is a
//! failure, not a skip.

use pocketrt::tokenizer::{describe_tokens, StreamDecoder, Tokenizer};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;
use unicode_normalization::UnicodeNormalization;

struct Data {
    tok: Tokenizer,
    docs: Vec<(String, Vec<u32>)>,
}

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

fn data() -> &'static Data {
    static D: OnceLock<Data> = OnceLock::new();
    D.get_or_init(|| {
        let dir = data_dir();
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}\nthe Qwen3 tokenizer test data is missing: run \
                     tests/fixtures/tokenizer/fetch-qwen3-tokenizer (or set POCKETRT_QWEN3_DIR)",
                    dir.join(name).display()
                )
            })
        };
        let t0 = Instant::now();
        let tok = Tokenizer::from_hf_json(&read("tokenizer.json")).expect("load tokenizer.json");
        eprintln!(
            "loaded Qwen3 tokenizer.json in {:.2} s",
            t0.elapsed().as_secs_f64()
        );
        let docs = read("corpus.jsonl")
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("corpus line");
                let text = v["text"].as_str().expect("text").to_string();
                let ids = v["ids"]
                    .as_array()
                    .expect("ids")
                    .iter()
                    .map(|x| x.as_u64().expect("id") as u32)
                    .collect();
                (text, ids)
            })
            .collect();
        Data { tok, docs }
    })
}

fn context(tok: &Tokenizer, text: &str, got: &[u32], want: &[u32]) -> String {
    let at = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    let lo = at.saturating_sub(4);
    let show = |ids: &[u32]| {
        format!(
            "{:?}",
            describe_tokens(tok, &ids[lo..(at + 6).min(ids.len())])
        )
    };
    format!(
        "first difference at id #{at} (got {} ids, want {}):\n  ours: {}\n  HF:   {}\n  text: {:?}",
        got.len(),
        want.len(),
        show(got),
        show(want),
        text.chars().take(300).collect::<String>()
    )
}

#[test]
fn qwen3_corpus_encodes_exactly_like_hf_tokenizers() {
    let d = data();
    let bytes: usize = d.docs.iter().map(|(t, _)| t.len()).sum();
    assert!(bytes >= 1_000_000, "corpus is only {bytes} bytes");
    // Warm run fills the word cache the way a long-running process would; time both.
    let t0 = Instant::now();
    let first: Vec<Vec<u32>> = d.docs.iter().map(|(t, _)| d.tok.encode(t, false)).collect();
    let cold = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    for (t, _) in &d.docs {
        std::hint::black_box(d.tok.encode(t, false));
    }
    let warm = t1.elapsed().as_secs_f64();
    let mb = bytes as f64 / 1e6;
    let ids: usize = first.iter().map(Vec::len).sum();
    eprintln!(
        "encode throughput: {:.2} MB/s first pass, {:.2} MB/s cached ({} docs, {bytes} bytes, {ids} ids)",
        mb / cold,
        mb / warm,
        d.docs.len()
    );
    let bad: Vec<String> = d
        .docs
        .iter()
        .zip(&first)
        .enumerate()
        .filter(|(_, ((_, want), got))| *got != want)
        .map(|(i, ((text, want), got))| format!("doc {i}: {}", context(&d.tok, text, got, want)))
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} documents differ from HF; first:\n{}",
        bad.len(),
        d.docs.len(),
        bad.iter().take(3).cloned().collect::<Vec<_>>().join("\n")
    );
    eprintln!("{} documents, all identical to HF tokenizers", d.docs.len());
}

#[test]
fn hand_written_splitters_equal_fancy_regex_on_the_corpus() {
    use pocketrt::tokenizer::pretokenize::{
        PreTokenizer, StepSpec, GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN,
    };
    let d = data();
    for pat in [QWEN2_PATTERN, LLAMA3_PATTERN, GPT2_PATTERN] {
        let spec = vec![StepSpec::Split(pat.into())];
        let fast = PreTokenizer::new(spec.clone()).unwrap();
        let slow = PreTokenizer::regex_only(spec).unwrap();
        let words = |p: &PreTokenizer, t: &str| {
            let mut v = Vec::new();
            p.split(t, &mut |w| v.push(w.to_string()));
            v
        };
        for (i, (text, _)) in d.docs.iter().enumerate() {
            assert_eq!(words(&fast, text), words(&slow, text), "{pat}: doc {i}");
        }
    }
}

#[test]
fn qwen3_decode_of_encode_gives_back_the_nfc_text() {
    let d = data();
    for (i, (text, ids)) in d.docs.iter().enumerate() {
        let back = d.tok.decode(ids, false).expect("decode");
        let nfc: String = text.nfc().collect();
        assert!(
            back == nfc,
            "doc {i}: decode(encode(x)) != NFC(x)\n{back:?}\n{nfc:?}"
        );
    }
}

#[test]
fn qwen3_streaming_decode_equals_whole_decode_and_never_splits_characters() {
    let d = data();
    for (i, (_, ids)) in d.docs.iter().enumerate() {
        let mut s = StreamDecoder::new(false);
        let mut out = String::new();
        for &id in ids {
            let piece = s.push(&d.tok, id).expect("push");
            assert!(
                !piece.contains('\u{FFFD}'),
                "doc {i}: a character was split: {piece:?}"
            );
            out.push_str(&piece);
        }
        out.push_str(&s.flush());
        assert_eq!(out, d.tok.decode(ids, false).unwrap(), "doc {i}");
    }
}

#[test]
fn qwen3_chinese_and_emoji_byte_tokens_stream_out_whole() {
    let tok = &data().tok;
    let text = "你好，世界🦙👨‍👩‍👧 龘";
    let ids = tok.encode(text, false);
    let mut s = StreamDecoder::new(false);
    let mut held_back = 0;
    let mut out = String::new();
    for &id in &ids {
        let piece = s.push(tok, id).unwrap();
        if piece.is_empty() {
            held_back += 1;
        }
        assert!(!piece.contains('\u{FFFD}'), "{piece:?}");
        out.push_str(&piece);
    }
    out.push_str(&s.flush());
    assert_eq!(out, text);
    assert!(
        held_back > 0,
        "no token ended inside a character: the test proves nothing"
    );
    // One token's bytes alone are an incomplete character here.
    let partial = ids
        .iter()
        .find(|&&id| std::str::from_utf8(tok.token_bytes(id).unwrap()).is_err());
    assert!(
        partial.is_some(),
        "expected at least one byte token: {ids:?}"
    );
}

#[test]
fn qwen3_special_tokens_in_text_become_their_ids_and_skip_on_request() {
    let tok = &data().tok;
    let ids = tok.encode("<|im_start|>user\nhi<|im_end|>", true);
    assert_eq!(ids.first(), Some(&151644), "{ids:?}");
    assert_eq!(ids.last(), Some(&151645), "{ids:?}");
    assert_eq!(tok.decode(&ids, true).unwrap(), "user\nhi");
    assert_eq!(
        tok.decode(&ids, false).unwrap(),
        "<|im_start|>user\nhi<|im_end|>"
    );
    assert_eq!(tok.eos_ids(), &[151645, 151643]);
    assert_eq!(tok.vocab_size(), 151669);
}

#[test]
fn qwen3_exported_tokenizer_json_encodes_identically() {
    let d = data();
    let again = Tokenizer::from_hf_json(&d.tok.to_hf_json()).expect("reload export");
    assert_eq!(again.vocab_size(), d.tok.vocab_size());
    for (i, (text, want)) in d.docs.iter().enumerate().step_by(7) {
        assert_eq!(&again.encode(text, false), want, "doc {i}");
    }
}
