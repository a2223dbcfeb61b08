//! What a save writes and what a restore may do, apart from where the bytes go (a file
//! natively, OPFS in the browser).

use super::format::{Header, Snapshot};
use crate::error::{Error, Result};

/// What a snapshot file holds after the last save or restore of a session: the next
/// save appends only what changed since.
#[derive(Clone, Debug, PartialEq)]
pub struct Saved {
    pub header: Header,
    /// The history the file restores to.
    pub tokens: Vec<u32>,
    /// The file's length.
    pub file_bytes: u64,
}

/// How to bring a snapshot file up to date with a session's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SavePlan {
    /// Append a record of the positions from `start` on (a rollback starts before the
    /// end of what the file holds; the positions before `start` stay as saved).
    Append { start: usize },
    /// Write the file anew: header, then every position (a first save, another header,
    /// or a file grown past twice its live bytes by rollbacks).
    Rewrite,
}

/// Slack before rollbacks' superseded records make a rewrite pay.
const REWRITE_SLACK: u64 = 1 << 20;

impl Saved {
    /// What the last restore of `snapshot` (a file of `file_bytes`) leaves in it.
    pub fn of(snapshot: &Snapshot) -> Saved {
        Saved {
            header: snapshot.header.clone(),
            tokens: snapshot.tokens.clone(),
            file_bytes: snapshot.file_bytes() as u64,
        }
    }

    /// The plan for saving `tokens` under `header` into the file this describes (`None`:
    /// no file yet, or not this session's).
    pub fn plan(saved: Option<&Saved>, header: &Header, tokens: &[u32]) -> SavePlan {
        let Some(saved) = saved.filter(|s| &s.header == header) else {
            return SavePlan::Rewrite;
        };
        let start = saved
            .tokens
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        let per = header.layout.bytes_per_position() as u64 + 4;
        let live = tokens.len() as u64 * per;
        let after = saved.file_bytes + (tokens.len() - start) as u64 * per;
        if after > 2 * live + REWRITE_SLACK {
            return SavePlan::Rewrite;
        }
        SavePlan::Append { start }
    }
}

/// What a restore of a snapshot may do on the session that reads it.
#[derive(Debug)]
pub enum Compat {
    /// Its rows are this backend's: they go into the cache as they are.
    Rows,
    /// Its rows were written elsewhere (another backend, profile, adapter or layout):
    /// its tokens are prefilled, and the report says why.
    Prefill(String),
    /// Another model with the same vocabulary, or rows that fail their checksum: this
    /// error, unless the caller asked for a fallback to a prefill of the tokens.
    Fallback(Error),
}

impl Compat {
    /// Check `snapshot` (named `what`) against the header this session would write and
    /// its `context`. A history of another vocabulary, or longer than the context, has
    /// no fallback: an error.
    pub fn check(snapshot: &Snapshot, ours: &Header, context: usize, what: &str) -> Result<Compat> {
        let theirs = &snapshot.header;
        let mismatch = |detail: String| Error::SessionMismatch {
            what: what.into(),
            detail,
        };
        if theirs.tokenizer != ours.tokenizer {
            return Err(mismatch(
                "it was saved with another tokenizer (its tokens mean other text here)".into(),
            ));
        }
        if snapshot.tokens.len() > context {
            return Err(mismatch(format!(
                "its history of {} tokens is longer than this context of {context}",
                snapshot.tokens.len()
            )));
        }
        if theirs.model != ours.model {
            return Ok(Compat::Fallback(mismatch(format!(
                "it was saved for another model ({}…, this one is {}…)",
                &theirs.model[..theirs.model.len().min(12)],
                &ours.model[..ours.model.len().min(12)]
            ))));
        }
        if let Some(detail) = &snapshot.rows_corrupt {
            return Ok(Compat::Fallback(Error::SessionCorrupt {
                what: what.into(),
                detail: detail.clone(),
            }));
        }
        if let Some(detail) = &snapshot.truncated {
            return Ok(Compat::Fallback(Error::SessionCorrupt {
                what: what.into(),
                detail: detail.clone(),
            }));
        }
        if !Self::own_rows(theirs, ours) {
            return Ok(Compat::Prefill(format!(
                "its KV rows were written by {} ({:?}), this session runs {} ({:?})",
                theirs.backend, theirs.layout.rows, ours.backend, ours.layout.rows
            )));
        }
        Ok(Compat::Rows)
    }

    fn own_rows(theirs: &Header, ours: &Header) -> bool {
        theirs.model == ours.model && theirs.backend == ours.backend && theirs.layout == ours.layout
    }

    /// What a restore does: `Ok(None)` write the rows, `Ok(Some(why))` prefill the
    /// tokens (`why` for the report), or the error. With `fallback`, a snapshot whose last
    /// save was cut short restores the rows of the saves before it (this backend's), and
    /// another model's or damaged rows are prefilled.
    pub fn decide(self, snapshot: &Snapshot, ours: &Header, fallback: bool) -> Result<Restore> {
        match self {
            Compat::Rows => Ok(Restore::Rows { note: None }),
            Compat::Prefill(why) => Ok(Restore::Prefill { why }),
            Compat::Fallback(e) if !fallback => Err(e),
            Compat::Fallback(e) => {
                let rows =
                    snapshot.rows_corrupt.is_none() && Self::own_rows(&snapshot.header, ours);
                Ok(match rows {
                    true => Restore::Rows {
                        note: Some(e.to_string()),
                    },
                    false => Restore::Prefill { why: e.to_string() },
                })
            }
        }
    }
}

/// What a restore does ([`Compat::decide`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restore {
    /// Write the snapshot's rows; `note`: what was left out (a save cut short).
    Rows { note: Option<String> },
    /// Prefill its tokens, for this reason.
    Prefill { why: String },
}

/// A restore opened, decided before anything changes (the opening the native and the
/// browser restores share): the snapshot's bytes parsed, checked against the header this
/// session writes and its context ([`Compat::check`] then [`Compat::decide`]; a chat that
/// is not JSON is corrupt), with the chat it brings back, why its tokens are prefilled
/// (`None`: its rows are written) and what of it was left out.
#[derive(Debug)]
pub struct RestorePlan {
    pub snapshot: Snapshot,
    pub messages: Vec<crate::tokenizer::Message>,
    pub prefilled: Option<String>,
    pub dropped: Option<String>,
}

impl RestorePlan {
    /// Open the snapshot `data` (named `what` in errors) for a session that writes `ours`
    /// and holds `context` positions; `fallback`: prefill where the rows cannot serve
    /// ([`Compat::decide`]).
    pub fn open(
        data: Vec<u8>,
        what: &str,
        ours: &Header,
        context: usize,
        fallback: bool,
    ) -> Result<RestorePlan> {
        let snapshot = Snapshot::parse(data, what)?;
        let compat = Compat::check(&snapshot, ours, context, what)?;
        let messages = match &snapshot.meta {
            Some(json) => serde_json::from_str(json).map_err(|e| Error::SessionCorrupt {
                what: what.into(),
                detail: format!("its chat: {e}"),
            })?,
            None => Vec::new(),
        };
        let (prefilled, dropped) = match compat.decide(&snapshot, ours, fallback)? {
            Restore::Rows { note } => (None, note),
            Restore::Prefill { why } => (Some(why), None),
        };
        Ok(RestorePlan {
            snapshot,
            messages,
            prefilled,
            dropped,
        })
    }

    /// What the file holds once restored on a session whose header is then `now`, for
    /// the next save to append to: only a file of this backend's rows, read whole (any
    /// other is written anew).
    pub fn saved(&self, now: &Header) -> Option<Saved> {
        let whole = self.prefilled.is_none() && self.dropped.is_none();
        (whole && self.snapshot.header == *now).then(|| Saved::of(&self.snapshot))
    }
}
