//! The format alone: records, rollbacks, the save plan, and every damaged byte.

use super::*;
use crate::engine::{KvLayout, RowKind};
use crate::error::Error;

fn header() -> Header {
    Header {
        format: FORMAT.into(),
        model: "aa".repeat(32),
        tokenizer: "bb".repeat(32),
        backend: "cpu/int8".into(),
        layout: KvLayout {
            rows: RowKind::F16Heads,
            layers: 2,
            kv_heads: 2,
            head_dim: 4,
        },
        context: 64,
        sliding_window_keep: Some(3),
    }
}

/// Distinct rows for positions `start..start + count` (their bytes name the position).
fn rows(start: usize, count: usize) -> Vec<u8> {
    let per = header().layout.bytes_per_position();
    (0..count * per)
        .map(|i| ((start + i / per) as u8).wrapping_mul(31) ^ (i % per) as u8)
        .collect()
}

/// A file's parts: the header; 5 positions, 3 more, the chat, a rollback to 6 with 4
/// new ones, the chat.
fn parts() -> Vec<Vec<u8>> {
    vec![
        encode_header(&header()),
        encode_kv(0, &[1, 2, 3, 4, 5], &rows(0, 5)),
        encode_kv(5, &[6, 7, 8], &rows(5, 3)),
        encode_meta("[\"first\"]"),
        encode_kv(6, &[17, 18, 19, 20], &rows(100, 4)),
        encode_meta("[\"second\"]"),
    ]
}

fn file() -> Vec<u8> {
    parts().concat()
}

#[test]
fn records_append_and_roll_back() {
    let s = Snapshot::parse(file(), "test").unwrap();
    assert_eq!(s.header, header());
    assert_eq!(s.tokens, [1, 2, 3, 4, 5, 6, 17, 18, 19, 20]);
    assert_eq!(s.meta.as_deref(), Some("[\"second\"]"));
    assert!(s.rows_corrupt.is_none());
    let runs: Vec<(usize, usize, Vec<u8>)> = s.rows().map(|(a, n, r)| (a, n, r.to_vec())).collect();
    let per = header().layout.bytes_per_position();
    // The first record whole, one position of the second, the third.
    assert_eq!(
        runs.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
        [(0, 5), (5, 1), (6, 4)]
    );
    assert_eq!(runs[0].2, rows(0, 5));
    // Each of the second record's runs cut to its first position.
    let run = per / header().layout.runs();
    let cut: Vec<u8> = rows(5, 3)
        .chunks(3 * run)
        .flat_map(|r| &r[..run])
        .copied()
        .collect();
    assert_eq!(runs[1].2, cut);
    assert_eq!(runs[2].2, rows(100, 4));
}

#[test]
fn the_save_plan_appends_what_changed_and_rewrites_other_files() {
    let h = header();
    let saved = Saved {
        header: h.clone(),
        tokens: vec![1, 2, 3, 4],
        file_bytes: 1000,
    };
    assert_eq!(Saved::plan(None, &h, &[1, 2]), SavePlan::Rewrite);
    assert_eq!(
        Saved::plan(Some(&saved), &h, &[1, 2, 3, 4, 9]),
        SavePlan::Append { start: 4 }
    );
    assert_eq!(
        Saved::plan(Some(&saved), &h, &[1, 2, 7]),
        SavePlan::Append { start: 2 }
    );
    let other = Header {
        backend: "gpu/gpu/x".into(),
        ..h.clone()
    };
    assert_eq!(
        Saved::plan(Some(&saved), &other, &[1, 2, 3, 4]),
        SavePlan::Rewrite
    );
    // A file grown far past its live rows by rollbacks is written anew.
    let grown = Saved {
        file_bytes: 50 << 20,
        ..saved
    };
    assert_eq!(
        Saved::plan(Some(&grown), &h, &[1, 2, 3, 4, 5]),
        SavePlan::Rewrite
    );
}

fn is_corrupt(e: &Error) -> bool {
    matches!(e, Error::SessionCorrupt { .. })
}

#[test]
fn every_truncation_is_a_typed_error_or_a_cut_save_the_restore_refuses() {
    let f = file();
    // Where each part ends.
    let ends: Vec<usize> = parts()
        .iter()
        .scan(0, |at, p| {
            *at += p.len();
            Some(*at)
        })
        .collect();
    let header_len = ends[0];
    for len in 0..f.len() {
        match Snapshot::parse(f[..len].to_vec(), "cut") {
            Err(e) => {
                assert!(len < header_len, "{len} bytes: {e}");
                assert!(
                    is_corrupt(&e) || matches!(e, Error::SessionMismatch { .. }),
                    "{e}"
                );
                assert!(e.to_string().contains("cut"), "{e}");
            }
            // Cut between records: a shorter, valid history (a save that never ran).
            Ok(s) if ends.contains(&len) => assert!(s.truncated.is_none()),
            // Cut inside one: the records before it, and what a restore refuses unasked.
            Ok(s) => {
                assert!(s.truncated.as_ref().unwrap().contains("truncated"), "{len}");
                let e = match Compat::check(&s, &header(), 64, "cut").unwrap() {
                    Compat::Fallback(e) => e,
                    other => panic!("{len}: {other:?}"),
                };
                assert!(is_corrupt(&e), "{e}");
                let fallback = Compat::check(&s, &header(), 64, "cut").unwrap();
                let plan = fallback.decide(&s, &header(), true).unwrap();
                assert!(matches!(plan, Restore::Rows { note: Some(_) }), "{plan:?}");
            }
        }
    }
}

#[test]
fn every_damaged_byte_is_caught() {
    let f = file();
    let good = Snapshot::parse(f.clone(), "x").unwrap();
    for at in 0..f.len() {
        let mut bad = f.clone();
        bad[at] ^= 0x5a;
        match Snapshot::parse(bad, "x") {
            Err(Error::SessionCorrupt { .. } | Error::SessionMismatch { .. }) => {}
            Err(e) => panic!("byte {at}: {e}"),
            // A length now past the end reads as a save cut short.
            Ok(s) if s.truncated.is_some() => {}
            // Only a rows byte leaves the tokens readable, and says so.
            Ok(s) => {
                assert_eq!(s.tokens, good.tokens, "byte {at}");
                assert!(s.rows_corrupt.is_some(), "byte {at} went unnoticed");
            }
        }
    }
}

#[test]
fn another_version_is_a_mismatch() {
    let mut f = file();
    f[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
    let e = Snapshot::parse(f, "v2").unwrap_err();
    assert!(matches!(e, Error::SessionMismatch { .. }), "{e}");
    assert!(e.to_string().contains("version 2"), "{e}");
}

#[test]
fn restores_check_model_tokenizer_backend_and_context() {
    let s = Snapshot::parse(file(), "x").unwrap();
    let ours = header();
    assert!(matches!(
        Compat::check(&s, &ours, 64, "x"),
        Ok(Compat::Rows)
    ));
    let gpu = Header {
        backend: "gpu/gpu/Apple M4".into(),
        ..ours.clone()
    };
    assert!(matches!(
        Compat::check(&s, &gpu, 64, "x"),
        Ok(Compat::Prefill(_))
    ));
    let model = Header {
        model: "cc".repeat(32),
        ..ours.clone()
    };
    let fallback = Compat::check(&s, &model, 64, "x").unwrap();
    assert!(matches!(
        fallback,
        Compat::Fallback(Error::SessionMismatch { .. })
    ));
    let tokenizer = Header {
        tokenizer: "dd".repeat(32),
        ..ours.clone()
    };
    let e = Compat::check(&s, &tokenizer, 64, "x").unwrap_err();
    assert!(matches!(e, Error::SessionMismatch { .. }), "{e}");
    let e = Compat::check(&s, &ours, 9, "x").unwrap_err();
    assert!(
        e.to_string().contains("longer than this context of 9"),
        "{e}"
    );
}

#[test]
fn hostile_lengths_allocate_nothing() {
    let mut f = encode_header(&header());
    f.extend_from_slice(b"KV01");
    f.extend_from_slice(&u64::MAX.to_le_bytes());
    // Past the end: read as a save cut short, which a restore refuses unasked.
    assert!(Snapshot::parse(f, "x").unwrap().truncated.is_some());
    let mut f = encode_header(&header());
    let mut rec = encode_kv(0, &[1], &rows(0, 1));
    rec[16..20].copy_from_slice(&u32::MAX.to_le_bytes()); // count
    f.extend(rec);
    assert!(is_corrupt(&Snapshot::parse(f, "x").unwrap_err()));
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&VERSION.to_le_bytes());
    f.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(is_corrupt(&Snapshot::parse(f, "x").unwrap_err()));
}
