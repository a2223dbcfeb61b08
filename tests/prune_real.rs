//! Vocabulary pruning on the real Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (never committed;
//! found through tests/real_data): 151,936 → 65,536 tokens chosen on a code + English
//! corpus every Debian machine with python3 has — a fixed list of Python stdlib modules and
//! three of every four files of /usr/share/common-licenses — and checked on held-out
//! modules and licenses. The package is converted once (into CARGO_TARGET_TMPDIR) and
//! shared by the tests.

mod real_data;

use pocketrt::config::ModelConfig;
use pocketrt::convert::{ConvertOptions, ConvertReport};
use pocketrt::cpu::{Model, WeightMode};
use pocketrt::format::gguf_source::GgufSource;
use pocketrt::format::package_source::PackageSource;
use pocketrt::format::ModelSource;
use pocketrt::prune::{convert_pruned, Corpus, PruneReport};
use pocketrt::tokenizer::{TokenOrigin, Tokenizer};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

const N: usize = 65_536;

/// Python stdlib modules (present from Python 3.9 to 3.13) the vocabulary is chosen on,
/// separated by whitespace.
const TRAIN_PY: &str =
    "argparse.py ast.py base64.py bisect.py calendar.py cmd.py code.py codecs.py \
     collections/__init__.py configparser.py contextlib.py copy.py csv.py \
     dataclasses.py difflib.py dis.py enum.py fnmatch.py fractions.py functools.py \
     getopt.py gettext.py glob.py gzip.py heapq.py hmac.py inspect.py ipaddress.py \
     json/decoder.py json/encoder.py json/__init__.py logging/__init__.py netrc.py \
     numbers.py operator.py optparse.py pprint.py queue.py random.py reprlib.py \
     sched.py secrets.py selectors.py shlex.py shutil.py socket.py statistics.py \
     string.py subprocess.py tempfile.py textwrap.py threading.py tokenize.py \
     trace.py traceback.py types.py typing.py uuid.py warnings.py weakref.py";
/// Held-out modules for the round trip.
const HELD_OUT_PY: &str = "ftplib.py imaplib.py locale.py mailbox.py pickle.py tarfile.py";
/// Greedy continuation length compared with the unpruned model.
const GENERATE: usize = 32;
/// Held-out text may grow by at most this much when encoded with the pruned tokenizer
/// (measured: +1.0%).
const MAX_GROWTH_PERCENT: f64 = 2.0;

fn stdlib() -> PathBuf {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .expect("python3 must be installed: the corpus is its stdlib");
    assert!(out.status.success(), "python3 failed: {out:?}");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The regular files of /usr/share/common-licenses, sorted: (training, held out = every
/// fourth).
fn licenses() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let dir = Path::new("/usr/share/common-licenses");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.symlink_metadata().unwrap().is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "too few licenses in {}", dir.display());
    let (train, held): (Vec<_>, Vec<_>) =
        files.into_iter().enumerate().partition(|(i, _)| i % 4 != 3);
    let strip = |v: Vec<(usize, PathBuf)>| v.into_iter().map(|(_, p)| p).collect();
    (strip(train), strip(held))
}

fn read(paths: impl IntoIterator<Item = PathBuf>) -> Corpus {
    let texts = paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.display().to_string(), text)
        })
        .collect();
    Corpus::from_texts(texts)
}

struct Pruned {
    dir: PathBuf,
    convert: ConvertReport,
    report: PruneReport,
    config_before: ModelConfig,
    original: Tokenizer,
    pruned: Tokenizer,
}

/// The pruned package, converted on first use.
fn pruned() -> &'static Pruned {
    static P: OnceLock<Pruned> = OnceLock::new();
    P.get_or_init(|| {
        let start = Instant::now();
        let lib = stdlib();
        let corpus = read(
            TRAIN_PY
                .split_whitespace()
                .map(|f| lib.join(f))
                .chain(licenses().0),
        );
        let mut src = GgufSource::open(&real_data::coder_gguf()).unwrap();
        let original = Tokenizer::from_gguf(src.gguf()).unwrap();
        let config_before = src.config().clone();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("prune-coder-65536");
        let _ = std::fs::remove_dir_all(&dir);
        let opts = ConvertOptions::default();
        let (convert, report) =
            convert_pruned(&mut src, &dir, &opts, &corpus, N, &mut |_| {}).unwrap();
        println!(
            "{report}\n(converted in {:.1} s)",
            start.elapsed().as_secs_f64()
        );
        let json = std::fs::read_to_string(dir.join("tokenizer.json")).unwrap();
        let pruned = Tokenizer::from_hf_json(&json).unwrap();
        Pruned {
            dir,
            convert,
            report,
            config_before,
            original,
            pruned,
        }
    })
}

#[test]
fn pruned_coder_package_shrinks_by_the_dropped_embedding_and_head_rows() {
    let p = pruned();
    let r = &p.report;
    assert_eq!((r.old_vocab, r.new_vocab), (151_936, N));
    // This GGUF has an untied head: token_embd and output both lose rows. A Q4 g64 row of
    // 896 is 448 + 56 bytes, and both parts of 151,936 and of 65,536 rows are already
    // 256-byte aligned, so the saving is exact.
    let matrices = if p.config_before.tie_embeddings { 1 } else { 2 };
    let row_bytes = 896 / 2 + 896 / 64 * 4;
    let saved = (r.old_vocab - r.new_vocab) as u64 * row_bytes * matrices;
    assert_eq!(r.package_bytes_before - r.package_bytes_after, saved);
    let on_disk: u64 = p
        .convert
        .manifest
        .shards
        .iter()
        .map(|s| std::fs::metadata(p.dir.join(&s.file)).unwrap().len())
        .sum();
    assert_eq!(on_disk, r.package_bytes_after);
    println!(
        "{} -> {} bytes: {saved} saved",
        r.package_bytes_before, r.package_bytes_after
    );
    // Every token the corpus uses fits, so the corpus itself encodes exactly as before.
    assert_eq!(r.selection.dropped_used, 0);
    assert_eq!(r.corpus_tokens_after, r.corpus_tokens_before);
    // The config's special ids name the same tokens as before.
    let cfg = PackageSource::open(&p.dir).unwrap().config().clone();
    assert_eq!(cfg.vocab_size, N);
    for (old, new) in p
        .config_before
        .eos_token_ids
        .iter()
        .zip(&cfg.eos_token_ids)
        .chain(
            p.config_before
                .pad_token_id
                .iter()
                .zip(cfg.pad_token_id.iter()),
        )
    {
        assert_eq!(p.original.id_to_token(*old), p.pruned.id_to_token(*new));
    }
    assert_eq!(
        p.pruned.id_to_token(cfg.eos_token_ids[0]),
        Some("<|im_end|>")
    );
}

#[test]
fn held_out_code_and_english_decode_back_exactly_and_grow_little() {
    let p = pruned();
    let lib = stdlib();
    let held = read(
        HELD_OUT_PY
            .split_whitespace()
            .map(|f| lib.join(f))
            .chain(licenses().1),
    );
    for (name, text) in &held.texts {
        let ids = p.pruned.encode(text, false);
        assert!(ids.iter().all(|&id| (id as usize) < N));
        assert!(
            p.pruned.decode(&ids, false).unwrap() == *text,
            "{name} does not round-trip"
        );
    }
    let (before, after) = (held.token_total(&p.original), held.token_total(&p.pruned));
    let growth = (after as f64 - before as f64) / before as f64 * 100.0;
    println!(
        "held out: {} files, {before} -> {after} tokens ({growth:+.3}%)",
        held.texts.len()
    );
    assert!(
        (0.0..MAX_GROWTH_PERCENT).contains(&growth),
        "held-out text grew by {growth:.3}% (limit {MAX_GROWTH_PERCENT}%)"
    );
}

#[test]
fn every_kept_token_is_produced_by_the_pruned_tokenizer_from_its_own_text() {
    let p = pruned();
    let t = &p.pruned;
    assert_eq!(t.vocab_size(), N);
    let byte_ids = t.byte_ids();
    assert!(
        byte_ids.iter().all(Option::is_some),
        "a byte token was dropped"
    );
    let origins = t.token_origins();
    let mut failures = Vec::new();
    for id in 0..N as u32 {
        let bytes = t.token_bytes(id).unwrap();
        let ok = match origins[id as usize] {
            TokenOrigin::Byte => t.encode_word(bytes) == [id],
            TokenOrigin::Added => t.encode(t.id_to_token(id).unwrap(), false) == [id],
            // The closure: every merge that builds it is still there.
            TokenOrigin::Merged { .. } if p.report.context_only.contains(&id) => {
                t.encode_word(bytes) == [id]
            }
            TokenOrigin::Merged { .. } => t.encodes_to_itself(id),
            other => {
                failures.push(format!("{id} {:?}: {other:?}", t.id_to_token(id)));
                continue;
            }
        };
        if !ok {
            failures.push(format!(
                "{id} {:?} is not produced from its text",
                t.id_to_token(id)
            ));
        }
    }
    println!(
        "{N} kept tokens checked; {} of them produced only inside longer text",
        p.report.context_only.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
}

/// The greedy tokens after `prompt`, and the logits each was chosen from.
fn greedy_with_logits(model: &Model, prompt: &[u32], n: usize) -> Vec<(u32, Vec<f32>)> {
    let mut cache = model.new_cache(prompt.len() + n).unwrap();
    let mut logits = Vec::new();
    for &t in prompt {
        logits = model.forward(t, &mut cache).unwrap();
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let next = argmax(&logits, |_| true);
        let step = std::mem::take(&mut logits);
        if out.len() + 1 < n {
            logits = model.forward(next, &mut cache).unwrap();
        }
        out.push((next, step));
    }
    out
}

/// The first index of the largest logit among the ids `allowed` accepts.
fn argmax(logits: &[f32], allowed: impl Fn(usize) -> bool) -> u32 {
    let mut best = None;
    for (i, &x) in logits.iter().enumerate().filter(|(i, _)| allowed(*i)) {
        if best.is_none_or(|(_, b)| x > b) {
            best = Some((i, x));
        }
    }
    best.unwrap().0 as u32
}

#[test]
fn greedy_generation_equals_the_unpruned_model_until_a_dropped_token_would_win() {
    let p = pruned();
    let kept = &p.report.selection.kept;
    let new_id = |old: u32| kept.binary_search(&old).ok().map(|i| i as u32);
    // (" fibonacci" is not kept: the corpus never uses it and its id is past the filler.)
    let prompt = "def quicksort(arr):";
    let old_prompt = p.original.encode(prompt, false);
    let mapped: Vec<u32> = old_prompt
        .iter()
        .map(|&id| new_id(id).expect("prompt token dropped"))
        .collect();
    assert_eq!(
        p.pruned.encode(prompt, false),
        mapped,
        "the prompt encodes differently"
    );

    // Both in Q4 mode: the GGUF requantized to Q4 g64 as the converter does, so the two
    // models share every weight but the dropped embedding rows.
    let start = Instant::now();
    let mut src = GgufSource::open(&real_data::coder_gguf()).unwrap();
    let full = Model::load(&mut src, WeightMode::Q4).unwrap();
    let steps = greedy_with_logits(&full, &old_prompt, GENERATE);
    drop(full);
    let mut pkg = PackageSource::open(&p.dir).unwrap();
    let small = Model::load(&mut pkg, WeightMode::Q4).unwrap();
    let got = small.greedy(&mapped, GENERATE).unwrap();
    println!(
        "two models, {GENERATE} tokens each, in {:.1} s",
        start.elapsed().as_secs_f64()
    );

    let full_ids: Vec<u32> = steps.iter().map(|s| s.0).collect();
    println!(
        "unpruned: {:?}",
        p.original.decode(&full_ids, false).unwrap()
    );
    println!("pruned:   {:?}", p.pruned.decode(&got, false).unwrap());
    match full_ids.iter().position(|&id| new_id(id).is_none()) {
        None => {
            println!("case: every unpruned token is kept; all {GENERATE} must match");
            let expect: Vec<u32> = full_ids.iter().map(|&id| new_id(id).unwrap()).collect();
            assert_eq!(got, expect);
        }
        Some(k) => {
            println!(
                "case: the unpruned model chose dropped token {} at step {k}",
                full_ids[k]
            );
            let expect: Vec<u32> = full_ids[..k]
                .iter()
                .map(|&id| new_id(id).unwrap())
                .collect();
            assert_eq!(got[..k], expect[..], "differs before the dropped token");
            // There the pruned model takes the best kept token of the same logits.
            let best_kept = argmax(&steps[k].1, |i| new_id(i as u32).is_some());
            assert_eq!(Some(got[k]), new_id(best_kept));
        }
    }
}
