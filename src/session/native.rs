//! [`Session::save`] and [`Session::restore`]: snapshots in files.

use super::format::{encode_header, encode_kv, encode_meta, Header, FORMAT};
use super::save::{RestorePlan, SavePlan, Saved};
use crate::error::{Error, Result};
use crate::generate::{common_prefix, ContextOverflow, Session};
use std::io::Write;
use std::path::Path;
use web_time::Instant;

/// What [`Session::save`] did.
#[derive(Clone, Debug)]
pub struct SaveReport {
    /// Tokens of the history the file now restores to.
    pub tokens: usize,
    /// Positions whose rows this save wrote (only those added since the last save, or
    /// all of them on a rewrite).
    pub positions: usize,
    /// Bytes this save wrote.
    pub bytes_written: u64,
    /// The file's length now.
    pub file_bytes: u64,
    /// The file was written anew (first save, another backend, or rollbacks compacted).
    pub rewrote: bool,
    pub seconds: f64,
}

/// How [`Session::restore`] treats a snapshot it cannot restore as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct RestoreOptions {
    /// A snapshot of another model with this vocabulary, or whose rows fail their
    /// checksum: prefill its tokens instead of failing.
    pub fallback: bool,
}

/// What [`Session::restore`] did.
#[derive(Clone, Debug)]
pub struct Restored {
    /// Tokens of the restored history (the cache holds them all).
    pub tokens: usize,
    /// Of those, the tokens whose rows came from the file (all, or none when prefilled).
    pub restored: usize,
    /// Why its tokens were prefilled instead (another backend; or with
    /// [`RestoreOptions::fallback`], another model or corrupt rows).
    pub prefilled: Option<String>,
    /// With [`RestoreOptions::fallback`]: what of the file was left out (its last save,
    /// cut short); the saves before it were restored.
    pub dropped: Option<String>,
    /// The snapshot's context policy.
    pub overflow: ContextOverflow,
    pub file_bytes: u64,
    pub seconds: f64,
}

fn write_all(path: &Path, parts: &[&[u8]], append: bool) -> Result<()> {
    let io = |e| Error::io(path, e);
    if append {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io)?;
        return parts.iter().try_for_each(|p| f.write_all(p)).map_err(io);
    }
    // A new file replaces the old one whole or not at all.
    let tmp = path.with_extension("tmp-snapshot");
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    parts
        .iter()
        .try_for_each(|p| f.write_all(p))
        .map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)
}

impl Session {
    /// The header a snapshot of this session has.
    fn snapshot_header(&self) -> Header {
        let engine = self.engine();
        Header {
            format: FORMAT.into(),
            model: engine.model_id().to_string(),
            tokenizer: super::tokenizer_fingerprint(self.tokenizer()),
            backend: engine.kv_rows_tag(),
            layout: engine.kv_layout(),
            context: engine.context(),
            sliding_window_keep: match self.overflow {
                ContextOverflow::SlidingWindow { keep } => Some(keep),
                ContextOverflow::Error => None,
            },
        }
    }

    /// Save the conversation to `path`: its history, KV rows and chat. When `path` is
    /// the file this session last saved or restored, only the positions added since are
    /// appended (a reply's rows); otherwise the file is written anew (atomically).
    pub fn save(&mut self, path: &Path) -> Result<SaveReport> {
        let t = Instant::now();
        let header = self.snapshot_header();
        let saved = self
            .snapshot
            .as_ref()
            .filter(|(p, _)| p == path)
            .map(|(_, s)| s);
        let saved = saved.filter(|s| s.file_bytes == file_len(path));
        let plan = Saved::plan(saved, &header, self.cached());
        let (start, head) = match plan {
            SavePlan::Append { start } => (start, Vec::new()),
            SavePlan::Rewrite => (0, encode_header(&header)),
        };
        let tokens = self.cached()[start..].to_vec();
        let rows = self.engine().read_kv(start, tokens.len())?;
        let record = encode_kv(start, &tokens, &rows);
        let messages = serde_json::to_string(self.messages()).expect("messages serialize");
        let meta = encode_meta(&messages);
        let append = plan != SavePlan::Rewrite;
        write_all(path, &[&head, &record, &meta], append)?;
        let written = (head.len() + record.len() + meta.len()) as u64;
        let file_bytes = if append {
            saved.map_or(0, |s| s.file_bytes) + written
        } else {
            written
        };
        let report = SaveReport {
            tokens: self.cached().len(),
            positions: tokens.len(),
            bytes_written: written,
            file_bytes,
            rewrote: !append,
            seconds: t.elapsed().as_secs_f64(),
        };
        let now = Saved {
            header,
            tokens: self.cached().to_vec(),
            file_bytes,
        };
        self.snapshot = Some((path.to_path_buf(), now));
        Ok(report)
    }

    /// Restore the conversation saved in `path`: its KV rows go into the cache as they
    /// are when this backend wrote them (no prefill), else its tokens are prefilled (the
    /// report says why). A snapshot of another tokenizer or version, or one longer than
    /// the context, is [`Error::SessionMismatch`]; a truncated one or a failed checksum
    /// [`Error::SessionCorrupt`]; another model or corrupt rows too, unless
    /// `opts.fallback`. Nothing changes in the session when it fails.
    pub fn restore(&mut self, path: &Path, opts: RestoreOptions) -> Result<Restored> {
        let t = Instant::now();
        let data = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let what = path.display().to_string();
        let (ours, context) = (self.snapshot_header(), self.engine().context());
        let mut plan = RestorePlan::open(data, &what, &ours, context, opts.fallback)?;
        let snapshot = &plan.snapshot;
        let tokens = snapshot.tokens.clone();
        let restored = match &plan.prefilled {
            None => {
                let (engine, cached, _) = self.parts_mut();
                engine.rewind(0);
                cached.clear();
                for (start, count, rows) in snapshot.rows() {
                    engine.write_kv(start, count, &rows)?;
                }
                *cached = tokens.clone();
                tokens.len()
            }
            Some(_) => {
                let keep = common_prefix(self.cached(), &tokens);
                self.keep_and_feed(keep, &tokens[keep..])?;
                0
            }
        };
        *self.parts_mut().2 = std::mem::take(&mut plan.messages);
        self.overflow = match plan.snapshot.header.sliding_window_keep {
            Some(keep) => ContextOverflow::SlidingWindow { keep },
            None => ContextOverflow::Error,
        };
        let file_bytes = plan.snapshot.file_bytes() as u64;
        // Under the header the restore leaves (its context policy).
        let saved = plan.saved(&self.snapshot_header());
        self.snapshot = saved.map(|s| (path.to_path_buf(), s));
        Ok(Restored {
            tokens: tokens.len(),
            restored,
            prefilled: plan.prefilled,
            dropped: plan.dropped,
            overflow: self.overflow,
            file_bytes,
            seconds: t.elapsed().as_secs_f64(),
        })
    }
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(u64::MAX, |m| m.len())
}
