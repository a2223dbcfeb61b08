//! Vocabulary pruning on a tiny random qwen2 model with an untied head and a small
//! byte-level BPE tokenizer: the kept embedding and head rows are the original rows bit for
//! bit (so the pruned model's logits are the original's at the kept ids), the config's
//! special ids are remapped, the package bytes before are what an unpruned conversion
//! writes, bad input is refused before anything is written, and the CLI prints the report.

use pocketrt::config::{Arch, ModelConfig};
use pocketrt::convert::{convert, package_bytes, ConvertOptions};
use pocketrt::cpu::{MemorySource, Model, WeightMode};
use pocketrt::format::package_source::PackageSource;
use pocketrt::format::{ModelSource, SourceTensor};
use pocketrt::prune::{convert_pruned, Corpus};
use pocketrt::quant::{MergeStats, Q4Tensor};
use pocketrt::tokenizer::bytelevel::encode_bytes;
use pocketrt::tokenizer::Tokenizer;
use pocketrt::{Error, Result};
use serde_json::json;
use std::path::PathBuf;

/// Merges of the toy tokenizer, in rank order (byte-level text).
const MERGES: [(&str, &str); 10] = [
    ("t", "h"),
    ("th", "e"),
    ("Ġ", "the"),
    ("a", "n"),
    ("an", "d"),
    ("Ġ", "and"),
    ("i", "n"),
    ("in", "g"),
    ("Ġ", "t"),
    ("Ġt", "o"),
];
/// 256 byte tokens, the 10 merged ones, 2 specials; the embedding has 4 padding rows more.
const TOKENS: usize = 256 + MERGES.len() + 2;
const ROWS: usize = TOKENS + 4;
const EOS: u32 = TOKENS as u32 - 1;
const PAD: u32 = TOKENS as u32 - 2;

fn tokenizer_json() -> String {
    let mut vocab = serde_json::Map::new();
    for b in 0..=255u8 {
        vocab.insert(encode_bytes(&[b]), json!(b));
    }
    for (i, (a, b)) in MERGES.iter().enumerate() {
        vocab.insert(format!("{a}{b}"), json!(256 + i));
    }
    let merges: Vec<String> = MERGES.iter().map(|(a, b)| format!("{a} {b}")).collect();
    let special = |id: u32, content: &str| json!({"id": id, "content": content, "special": true});
    json!({
        "added_tokens": [special(PAD, "<|endoftext|>"), special(EOS, "<|im_end|>")],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
    })
    .to_string()
}

fn config() -> ModelConfig {
    ModelConfig {
        arch: Arch::Qwen2,
        hidden_size: 64,
        n_layers: 1,
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 32,
        ffn_size: 128,
        vocab_size: ROWS,
        rope_theta: 1e6,
        rms_eps: 1e-6,
        max_context: 256,
        tie_embeddings: false,
        qkv_bias: true,
        qk_norm: false,
        bos_token_id: None,
        eos_token_ids: vec![EOS],
        pad_token_id: Some(PAD),
    }
}

/// A random model that carries the toy tokenizer.
struct WithTokenizer(MemorySource);

impl ModelSource for WithTokenizer {
    fn config(&self) -> &ModelConfig {
        self.0.config()
    }
    fn tensors(&self) -> &[SourceTensor] {
        self.0.tensors()
    }
    fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        self.0.read_f32(name)
    }
    fn read_q4(&mut self, name: &str) -> Result<(Q4Tensor, MergeStats)> {
        self.0.read_q4(name)
    }
    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        Ok(Some(tokenizer_json()))
    }
    fn chat_template(&self) -> Option<String> {
        None
    }
    fn container(&self) -> String {
        "memory + toy tokenizer".into()
    }
}

fn model() -> WithTokenizer {
    WithTokenizer(MemorySource::random(config(), 7, 0.05).unwrap())
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pocketrt-prune-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn tokenizer_ids(text: &str) -> Vec<u32> {
    Tokenizer::from_hf_json(&tokenizer_json())
        .unwrap()
        .encode(text, false)
}

fn corpus(text: &str) -> Corpus {
    Corpus::from_texts(vec![("corpus".into(), text.into())])
}

/// Row `r` of a Q4 tensor as (codes, qparams) words.
fn row(q: &Q4Tensor, r: usize) -> (&[u32], &[u32]) {
    let (c, p) = (q.cols / 8, q.cols / 64);
    (&q.codes[r * c..][..c], &q.qparams[r * p..][..p])
}

#[test]
fn pruned_package_keeps_kept_rows_exactly_and_remaps_special_ids() {
    let (full_dir, pruned_dir) = (tmpdir("full"), tmpdir("pruned"));
    let opts = ConvertOptions::default();
    let full = convert(&mut model(), &full_dir, &opts, &mut |_| {}).unwrap();
    // "the", " the" and " and" are used; 256 bytes + 2 specials are required; N leaves
    // room for them, their parents th, an, and, and one filler.
    let text = "the the and and the";
    let n = 258 + 6 + 1;
    let (report, prune) = convert_pruned(
        &mut model(),
        &pruned_dir,
        &opts,
        &corpus(text),
        n,
        &mut |_| {},
    )
    .unwrap();
    println!("{prune}");
    assert_eq!(prune.package_bytes_before, full.package_bytes);
    assert_eq!(package_bytes(&config()).unwrap(), full.package_bytes);
    assert_eq!(prune.package_bytes_after, report.package_bytes);
    assert_eq!((prune.old_vocab, prune.new_vocab), (ROWS, n));
    let kept = &prune.selection.kept;
    assert_eq!(kept.len(), n);
    // the (257), Ġthe (258), Ġand (261) used; th (256), an (259), and (260) for closure;
    // in (262) fills the last slot: the lowest id left that encodes to itself.
    for id in 256..=262 {
        assert!(kept.contains(&id), "{id} not kept: {kept:?}");
    }
    let s = &prune.selection;
    assert_eq!(
        (s.required, s.used, s.closure_only, s.filler),
        (258, 3, 3, 1)
    );
    assert_eq!(prune.corpus_tokens_after, prune.corpus_tokens_before);

    let mut src = PackageSource::open(&pruned_dir).unwrap();
    let cfg = src.config().clone();
    assert_eq!(cfg.vocab_size, n);
    assert_eq!(cfg.eos_token_ids, vec![n as u32 - 1]);
    assert_eq!(cfg.pad_token_id, Some(n as u32 - 2));
    let tok = Tokenizer::from_hf_json(&src.tokenizer_json().unwrap().unwrap()).unwrap();
    assert_eq!(tok.vocab_size(), n);
    assert_eq!(tok.id_to_token(n as u32 - 1), Some("<|im_end|>"));
    let ids = tok.encode("the and<|im_end|>", false);
    assert_eq!(tok.decode(&ids, false).unwrap(), "the and<|im_end|>");

    let mut full_src = PackageSource::open(&full_dir).unwrap();
    for name in ["token_embd.weight", "output.weight"] {
        let (a, _) = full_src.read_q4(name).unwrap();
        let (b, _) = src.read_q4(name).unwrap();
        assert_eq!((b.rows, b.cols), (n, a.cols), "{name}");
        for (new, &old) in kept.iter().enumerate() {
            assert_eq!(row(&b, new), row(&a, old as usize), "{name} row {old}");
        }
    }
    // Every other tensor is unchanged.
    let (a, _) = full_src.read_q4("blk.0.ffn_up.weight").unwrap();
    assert_eq!(src.read_q4("blk.0.ffn_up.weight").unwrap().0, a);
    // So the pruned model's logits are the full model's at the kept ids, step by step.
    let full_model = Model::load(&mut full_src, WeightMode::Q4).unwrap();
    let small_model = Model::load(&mut src, WeightMode::Q4).unwrap();
    let (mut c1, mut c2) = (
        full_model.new_cache(8).unwrap(),
        small_model.new_cache(8).unwrap(),
    );
    for old in tokenizer_ids("the and") {
        let new = kept.binary_search(&old).unwrap() as u32;
        let a = full_model.forward(old, &mut c1).unwrap();
        let b = small_model.forward(new, &mut c2).unwrap();
        let picked: Vec<f32> = kept.iter().map(|&k| a[k as usize]).collect();
        assert_eq!(b, picked);
    }
    for d in [full_dir, pruned_dir] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn bad_vocab_size_or_empty_corpus_is_refused_before_writing() {
    let out = tmpdir("bad");
    let opts = ConvertOptions::default();
    let expect = |r: Result<_>, needle: &str| match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("accepted; expected an error with {needle:?}"),
    };
    let run = |text: &str, n: usize| {
        convert_pruned(&mut model(), &out, &opts, &corpus(text), n, &mut |_| {}).map(|_| ())
    };
    // 256 byte tokens + 2 specials are the least any pruned vocabulary keeps.
    expect(
        run("the", 257),
        "--vocab-size 257 is smaller than the 258 tokens",
    );
    expect(run("", 300), "corpus is empty");
    expect(run("the", ROWS), "nothing to prune");
    assert!(
        !out.exists(),
        "a refused conversion wrote {}",
        out.display()
    );
}

fn pocketrt(args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_pocketrt"))
        .args(args)
        .output()
        .expect("run pocketrt")
}

#[test]
fn cli_convert_prune_vocab_prints_the_report_and_refuses_bad_input() {
    let (dir, out) = (tmpdir("cli-src"), tmpdir("cli-out"));
    convert(&mut model(), &dir, &ConvertOptions::default(), &mut |_| {}).unwrap();
    let text = dir.join("corpus.txt");
    std::fs::write(&text, "the the and and the").unwrap();
    let run = |n: &str, corpus: &std::path::Path| {
        pocketrt(&[
            "convert".as_ref(),
            dir.as_os_str(),
            out.as_os_str(),
            "--prune-vocab".as_ref(),
            corpus.as_os_str(),
            "--vocab-size".as_ref(),
            n.as_ref(),
        ])
    };
    let o = run("265", &text);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for line in [
        format!("vocabulary:      {ROWS} -> 265 tokens"),
        "corpus tokens:   5 -> 5 (+0.00%)".into(),
        "3 unused but kept for closure".into(),
    ] {
        assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
    }
    assert!(PackageSource::open(&out).unwrap().config().vocab_size == 265);
    let o = run("100", &text);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("--vocab-size 100 is smaller than the 258"),
        "{stderr}"
    );
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let o = run("265", &empty);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("corpus is empty"),
        "{stderr}"
    );
    // --vocab-size needs --prune-vocab.
    let o = pocketrt(&[
        "convert".as_ref(),
        dir.as_os_str(),
        out.as_os_str(),
        "--vocab-size".as_ref(),
        "300".as_ref(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--prune-vocab"));
    for d in [dir, out] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
