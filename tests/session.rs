//! Session snapshots natively (`pocketrt::session`, `Session::save` / `restore`) on the
//! tiny Qwen3-shaped model of the API fixtures, on the fast CPU backend and the oracle:
//! a restored chat continues exactly as the uninterrupted one (greedy and seeded
//! sampling with penalties, whose window is the history), saves after the first append
//! only a reply's rows, another backend's snapshot is prefilled and says so, and every
//! damaged or foreign snapshot is a typed error that leaves the session as it was (or,
//! asked for, a prefill of its tokens). The GPU backend: tests/gpu_session.rs.

mod api_common;

use api_common::{config, tokenizer, weights, TEMPLATE};
use pocketrt::cpu::WeightMode;
use pocketrt::engine::{Backend, Engine};
use pocketrt::generate::{GenerateOptions, Session};
use pocketrt::sampler::SamplerConfig;
use pocketrt::session::{RestoreOptions, VERSION};
use pocketrt::tokenizer::ChatTemplate;
use pocketrt::Error;
use std::path::{Path, PathBuf};

const CONTEXT: usize = 256;

fn session_seeded(backend: Backend, seed: u64, context: usize) -> Session {
    let mut src = pocketrt::cpu::MemorySource::random(config(), seed, 0.5).unwrap();
    let engine = Engine::load(&mut src, backend, WeightMode::Q4, context).unwrap();
    let template = ChatTemplate::new(TEMPLATE).unwrap();
    let mut s = Session::new(engine, tokenizer(), Some(template));
    s.set_system("You are terse.");
    s
}

fn session(backend: Backend) -> Session {
    // The API fixtures' weights (seed 25).
    let _ = weights;
    session_seeded(backend, 25, CONTEXT)
}

fn greedy(n: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens: n,
        ..Default::default()
    }
}

/// Seeded sampling whose repetition penalty looks back over the history.
fn sampled(n: usize) -> GenerateOptions {
    let sampler = SamplerConfig {
        temperature: 0.9,
        top_k: 20,
        repetition_penalty: 1.3,
        seed: 11,
        ..SamplerConfig::greedy()
    };
    GenerateOptions {
        max_tokens: n,
        sampler,
        ..Default::default()
    }
}

fn chat(s: &mut Session, text: &str, opts: &GenerateOptions) -> (String, usize) {
    let (reply, stats) = s.chat(text, opts, |_| true).unwrap();
    (reply, stats.reused_tokens)
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pocketrt-session-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn restore(
    s: &mut Session,
    path: &Path,
    fallback: bool,
) -> pocketrt::Result<pocketrt::session::Restored> {
    s.restore(path, RestoreOptions { fallback })
}

#[test]
fn a_restored_chat_continues_like_the_uninterrupted_one() {
    for backend in [Backend::Cpu, Backend::Reference] {
        let path = tmp(&format!("chat-{backend:?}.snap"));
        let mut a = session(backend);
        chat(&mut a, "Name a colour.", &greedy(10));
        let first = a.save(&path).unwrap();
        assert!(
            first.rewrote && first.positions == a.cached_tokens(),
            "{first:?}"
        );
        let before = a.cached().to_vec();
        chat(&mut a, "And a fruit?", &greedy(10));
        // The second save appends only the positions the turn changed (the template
        // renders the last reply anew, so a few before the turn's own).
        let second = a.save(&path).unwrap();
        assert!(!second.rewrote, "{second:?}");
        let kept = before
            .iter()
            .zip(a.cached())
            .take_while(|(x, y)| x == y)
            .count();
        assert!(kept > before.len() / 2, "{kept} of {}", before.len());
        assert_eq!(second.positions, a.cached_tokens() - kept, "{second:?}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), second.file_bytes);
        assert!(
            second.bytes_written < first.bytes_written,
            "{first:?} {second:?}"
        );

        let mut b = session(backend);
        let r = restore(&mut b, &path, false).unwrap();
        assert_eq!(
            (r.tokens, r.restored, r.prefilled.clone()),
            (a.cached_tokens(), a.cached_tokens(), None),
            "{r:?}"
        );
        assert_eq!(b.cached(), a.cached());
        assert_eq!(b.messages(), a.messages());

        // The next turn reuses what the uninterrupted one reuses (the history but the
        // last reply, which the template renders anew), and the reply is the same.
        let want = chat(&mut a, "One more?", &greedy(12));
        let got = chat(&mut b, "One more?", &greedy(12));
        assert_eq!(got, want, "{backend:?}: greedy (text, reused tokens)");
        assert!(got.1 > 0);
        let want = chat(&mut a, "Surprise me.", &sampled(16));
        let got = chat(&mut b, "Surprise me.", &sampled(16));
        assert_eq!(got, want, "{backend:?}: seeded sampling");
        assert_eq!(b.cached(), a.cached());
    }
}

#[test]
fn another_backends_snapshot_is_prefilled_and_says_so() {
    let path = tmp("cross.snap");
    let mut cpu = session(Backend::Cpu);
    chat(&mut cpu, "Name a colour.", &greedy(8));
    cpu.save(&path).unwrap();
    let mut oracle = session(Backend::Reference);
    let r = restore(&mut oracle, &path, false).unwrap();
    let why = r.prefilled.expect("prefilled");
    assert!(
        why.contains("cpu/int8") && why.contains("reference/q4"),
        "{why}"
    );
    assert_eq!((r.tokens, r.restored), (cpu.cached_tokens(), 0));
    assert_eq!(oracle.cached(), cpu.cached());
    // It continues as the oracle continues the same history from scratch.
    let mut fresh = session(Backend::Reference);
    let mut tokens = cpu.cached().to_vec();
    tokens.extend(
        fresh
            .tokenizer()
            .encode("<|im_start|>user\nMore?<|im_end|>\n", true),
    );
    let want = fresh.generate(&tokens, &greedy(8), |_| true).unwrap().0;
    let got = oracle.generate(&tokens, &greedy(8), |_| true).unwrap();
    assert_eq!(got.0, want);
    assert_eq!(got.1.reused_tokens, cpu.cached_tokens());
    // Its next save writes the file anew, with this backend's rows.
    assert!(oracle.save(&path).unwrap().rewrote);
    let mut again = session(Backend::Reference);
    assert_eq!(restore(&mut again, &path, false).unwrap().prefilled, None);
}

/// `s` saved to a file, its bytes, and the continuation an uninterrupted session gives.
fn saved(name: &str) -> (PathBuf, Vec<u8>, Vec<u32>, String) {
    let path = tmp(name);
    let mut a = session(Backend::Cpu);
    chat(&mut a, "Name a colour.", &greedy(8));
    a.save(&path).unwrap();
    let history = a.cached().to_vec();
    let next = chat(&mut a, "More?", &greedy(8)).0;
    (path.clone(), std::fs::read(&path).unwrap(), history, next)
}

/// A session mid-conversation: what it holds must survive a failed restore.
fn busy() -> Session {
    let mut s = session(Backend::Cpu);
    chat(&mut s, "Something else entirely.", &greedy(6));
    s
}

fn assert_refused(path: &Path, bytes: &[u8], corrupt: bool) {
    std::fs::write(path, bytes).unwrap();
    let mut s = busy();
    let (cached, messages) = (s.cached().to_vec(), s.messages().to_vec());
    let e = restore(&mut s, path, false).unwrap_err();
    match (&e, corrupt) {
        (Error::SessionCorrupt { .. }, true) | (Error::SessionMismatch { .. }, false) => {}
        _ => panic!("{}: {e}", path.display()),
    }
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert_eq!(
        (s.cached(), s.messages()),
        (&cached[..], &messages[..]),
        "{e}"
    );
}

#[test]
fn damaged_or_foreign_snapshots_are_typed_errors_and_leave_the_session() {
    let (path, bytes, history, _) = saved("bad.snap");
    // Truncated anywhere inside a record; a wrong byte in the header or the tokens.
    for cut in [4, 40, bytes.len() / 2, bytes.len() - 3] {
        assert_refused(&path, &bytes[..cut], true);
    }
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 3] ^= 1;
    assert_refused(&path, &flipped, true);
    // Another version.
    let mut v = bytes.clone();
    v[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
    assert_refused(&path, &v, false);
    // Not a snapshot at all.
    assert_refused(&path, b"GGUF and then some", false);

    // A history longer than the context: no fallback can hold it.
    std::fs::write(&path, &bytes).unwrap();
    let mut short = session_seeded(Backend::Cpu, 25, history.len() - 1);
    let e = restore(&mut short, &path, true).unwrap_err();
    assert!(matches!(e, Error::SessionMismatch { .. }), "{e}");
    assert!(e.to_string().contains("longer than this context"), "{e}");
    // A missing file is an I/O error naming it.
    let e = restore(&mut busy(), &tmp("none.snap"), true).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

#[test]
fn corrupt_rows_or_another_model_fall_back_to_a_prefill_when_asked() {
    let (path, bytes, history, next) = saved("fallback.snap");
    // A wrong byte in the rows (the last record's, before its checksum and the chat).
    let mut rows = bytes.clone();
    let at = bytes.len() - 200;
    rows[at] ^= 0x80;
    std::fs::write(&path, &rows).unwrap();
    let e = restore(&mut busy(), &path, false).unwrap_err();
    assert!(matches!(e, Error::SessionCorrupt { .. }), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
    let mut s = busy();
    let r = restore(&mut s, &path, true).unwrap();
    assert!(r.prefilled.unwrap().contains("checksum"));
    assert_eq!(s.cached(), &history[..]);
    assert_eq!(
        chat(&mut s, "More?", &greedy(8)).0,
        next,
        "the prefilled history continues alike"
    );

    // Another model of the same vocabulary: its history is prefilled on this one.
    std::fs::write(&path, &bytes).unwrap();
    let mut other = session_seeded(Backend::Cpu, 26, CONTEXT);
    let e = restore(&mut other, &path, false).unwrap_err();
    assert!(matches!(e, Error::SessionMismatch { .. }), "{e}");
    assert!(e.to_string().contains("another model"), "{e}");
    let r = restore(&mut other, &path, true).unwrap();
    assert!(r.prefilled.unwrap().contains("another model"));
    assert_eq!((other.cached(), r.restored), (&history[..], 0));
}

#[test]
fn a_save_cut_short_restores_the_saves_before_it_when_asked() {
    let path = tmp("cut.snap");
    let mut a = session(Backend::Cpu);
    chat(&mut a, "Name a colour.", &greedy(8));
    let first = a.save(&path).unwrap();
    let history = a.cached().to_vec();
    chat(&mut a, "And a fruit?", &greedy(8));
    let second = a.save(&path).unwrap();
    assert!(!second.rewrote);
    // The second save killed halfway through its append.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(
        &path,
        &bytes[..(first.file_bytes + second.bytes_written / 2) as usize],
    )
    .unwrap();
    let e = restore(&mut busy(), &path, false).unwrap_err();
    assert!(
        matches!(e, Error::SessionCorrupt { .. }) && e.to_string().contains("truncated"),
        "{e}"
    );
    let mut b = session(Backend::Cpu);
    let r = restore(&mut b, &path, true).unwrap();
    assert_eq!((r.prefilled, r.restored), (None, history.len()));
    assert!(r.dropped.unwrap().contains("incomplete record"));
    assert_eq!(b.cached(), &history[..]);
    // The next save writes the file anew (not after the torn record).
    assert!(b.save(&path).unwrap().rewrote);
    assert!(restore(&mut session(Backend::Cpu), &path, false).is_ok());
}
