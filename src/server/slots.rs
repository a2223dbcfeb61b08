//! The KV cache slots of `--parallel N` on one session ([`Slots`]): which slot a request
//! runs in (the one whose tokens it continues with the longest shared prefix, else the
//! least recently used: [`Slots::route`]), each slot's stable id, the reload after a lost
//! GPU device, and llama.cpp's slot API on `--slot-save-path DIR`.
//!
//! The slot API: `GET /slots` lists the slots, `POST /slots/{id}?action=save|restore|erase`
//! with `{"filename": "NAME"}` saves a slot to `DIR/NAME` as a session snapshot
//! ([`crate::session`]), restores one into it, or empties it; the responses are
//! llama.cpp's (`n_saved` / `n_written`, `n_restored` / `n_read`, `n_erased`, `timings`).
//! The route checks the request ([`SlotRequest::parse`]: the folder is configured, the
//! slot exists, the name is a plain file name); the action runs as a job on the model
//! thread's queue, after the requests before it. A slot that is not the session's cache
//! is swapped in for it and back out.

use super::errors::{api_error, not_supported};
use super::{Reopen, State};
use crate::api::ApiError;
use crate::generate::{common_prefix, Session, SessionSlot};
use crate::session::RestoreOptions;
use serde_json::{json, Value as Json};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What a slot request asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum SlotRequest {
    /// `GET /slots`.
    List,
    Save {
        id: usize,
        filename: String,
    },
    Restore {
        id: usize,
        filename: String,
    },
    Erase {
        id: usize,
    },
}

impl SlotRequest {
    /// The request of `POST /slots/{id}?action=ACTION` with `body`, checked against
    /// `slots` slots.
    pub fn parse(
        id: &str,
        action: Option<&str>,
        body: &str,
        slots: usize,
    ) -> Result<SlotRequest, ApiError> {
        let id: usize = id.parse().ok().filter(|&i| i < slots).ok_or_else(|| {
            ApiError::invalid(
                "id_slot",
                format!("Invalid slot ID {id:?}: this server has slots 0..{slots} (--parallel)"),
            )
        })?;
        let filename = || -> Result<String, ApiError> {
            let doc: Json = serde_json::from_str(body)
                .map_err(|e| ApiError::malformed(format!("The request body is not JSON: {e}")))?;
            let name = doc["filename"].as_str().ok_or_else(|| {
                ApiError::invalid("filename", "the body needs a \"filename\" string")
            })?;
            check_filename(name)?;
            Ok(name.to_string())
        };
        match action {
            Some("save") => Ok(SlotRequest::Save {
                id,
                filename: filename()?,
            }),
            Some("restore") => Ok(SlotRequest::Restore {
                id,
                filename: filename()?,
            }),
            Some("erase") => Ok(SlotRequest::Erase { id }),
            other => Err(ApiError::invalid(
                "action",
                format!("Invalid action {other:?}: save, restore or erase"),
            )),
        }
    }

    /// The path the worker logs it under.
    pub fn label(&self) -> String {
        match self {
            SlotRequest::List => "GET /slots".into(),
            SlotRequest::Save { id, .. } => format!("POST /slots/{id}?action=save"),
            SlotRequest::Restore { id, .. } => format!("POST /slots/{id}?action=restore"),
            SlotRequest::Erase { id } => format!("POST /slots/{id}?action=erase"),
        }
    }
}

/// A file name a client may give: one plain name inside the slot folder (no path
/// separator, no `..`, no drive, no control character, not hidden), as llama.cpp's
/// `fs_validate_filename` allows.
pub(super) fn check_filename(name: &str) -> Result<(), ApiError> {
    let bad = |why: &str| {
        Err(ApiError::invalid(
            "filename",
            format!("Invalid filename {name:?}: {why}"),
        ))
    };
    if name.is_empty() || name.len() > 255 {
        return bad("a name of 1 to 255 bytes");
    }
    if name.contains(['/', '\\', ':']) {
        return bad("a plain file name, without a path");
    }
    if name.contains("..") || name.starts_with('.') {
        return bad("no \"..\" and no leading \".\"");
    }
    if name.chars().any(char::is_control) || name.trim() != name {
        return bad("no control characters, no leading or trailing spaces");
    }
    Ok(())
}

/// The session and its parked KV cache slots.
pub(super) struct Slots {
    pub session: Session,
    reopen: Reopen,
    parked: Vec<SessionSlot>,
    /// When each cache was last used: the session's, then the parked ones' (0: never).
    used: Vec<u64>,
    /// The slot id (`/slots/{id}`) of each cache, in the same order: a slot keeps its id
    /// as its cache moves in and out of the session.
    ids: Vec<usize>,
    clock: u64,
}

impl Slots {
    /// `parallel` slots on `session`'s weights, refused before any is allocated when
    /// their caches would not fit the memory available.
    pub fn new(session: Session, reopen: Reopen, parallel: usize) -> crate::Result<Slots> {
        if parallel > 1 {
            let each = session.engine().kv_cache_bytes();
            let need = each.saturating_mul(parallel as u64);
            if let Some(free) = available_memory() {
                if need > free {
                    return Err(crate::Error::InvalidArgument(format!(
                        "--parallel {parallel} needs {} MiB of KV cache ({parallel} × {} MiB \
                         at context {}), but only {} MiB of memory is available: lower \
                         --parallel or --context",
                        need >> 20,
                        each >> 20,
                        session.engine().context(),
                        free >> 20
                    )));
                }
            }
        }
        let parked = (1..parallel)
            .map(|_| session.new_slot())
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(Slots {
            session,
            reopen,
            parked,
            used: vec![0; parallel],
            ids: (0..parallel).collect(),
            clock: 0,
        })
    }

    /// Where slot `id`'s cache is: 0 in the session, `i` in `parked[i - 1]`.
    fn position(&self, id: usize) -> usize {
        let at = self.ids.iter().position(|&i| i == id);
        at.expect("slot ids are checked against --parallel")
    }

    /// Slot `id` was used now (the least recently used slot is the one evicted).
    pub fn touch(&mut self, id: usize) {
        self.clock += 1;
        let at = self.position(id);
        self.used[at] = self.clock;
    }

    /// Put the slot that suits `prompt` best ([`pick`]) into the session; returns the
    /// prefix they share.
    pub fn route(&mut self, prompt: &[u32]) -> crate::Result<usize> {
        let caches =
            std::iter::once(self.session.cached()).chain(self.parked.iter().map(|s| s.cached()));
        let i = pick(prompt, caches.zip(self.used.iter().copied()));
        if i > 0 {
            self.session.swap_slot(&mut self.parked[i - 1])?;
            self.used.swap(0, i);
            self.ids.swap(0, i);
        }
        self.clock += 1;
        self.used[0] = self.clock;
        Ok(common_prefix(self.session.cached(), prompt))
    }

    /// After a lost GPU device: the weights on a new device, the cache refilled with the
    /// tokens it held. A reload that fails is said; the next request fails the same way
    /// (503) and tries again.
    pub fn reload(&mut self) {
        let t0 = Instant::now();
        match (self.reopen)().and_then(|mut src| self.session.reload(src.as_mut())) {
            Ok(()) => eprintln!(
                "pocketrt serve: model reloaded on a new GPU device in {:.1} s",
                t0.elapsed().as_secs_f64()
            ),
            Err(e) => eprintln!("pocketrt serve: reloading the model failed: {e}"),
        }
    }

    /// Answer a slot request (the route checked it) in the folder `dir`: its JSON.
    pub fn slot_request(
        &mut self,
        req: &SlotRequest,
        dir: Option<&Path>,
        state: &State,
    ) -> Result<Json, ApiError> {
        let m = &state.metrics;
        let path =
            |filename: &str| Ok::<_, ApiError>(dir.ok_or_else(not_supported)?.join(filename));
        let done = match req {
            SlotRequest::List => {
                let context = self.session.engine().context();
                let list: Vec<Json> = (0..self.ids.len())
                    .map(|id| {
                        let cached = self.slot_tokens(id);
                        json!({"id": id, "n_ctx": context, "n_cached": cached})
                    })
                    .collect();
                return Ok(Json::Array(list));
            }
            SlotRequest::Save { id, filename } => {
                let path = path(filename)?;
                let r = self.with_slot(*id, |s| s.save(&path))??;
                m.slot_saves.fetch_add(1, Ordering::Relaxed);
                if state.opts.verbose {
                    eprintln!(
                        "  slot {id}: saved {} tokens to {} ({} positions, {} bytes written, \
                         file {} bytes{})",
                        r.tokens,
                        path.display(),
                        r.positions,
                        r.bytes_written,
                        r.file_bytes,
                        if r.rewrote { ", written anew" } else { "" }
                    );
                }
                json!({
                    "id_slot": id,
                    "filename": filename,
                    "n_saved": r.tokens,
                    "n_written": r.bytes_written,
                    "timings": {"save_ms": r.seconds * 1e3},
                })
            }
            SlotRequest::Restore { id, filename } => {
                let path = path(filename)?;
                if !path.is_file() {
                    return Err(api_error(
                        "invalid_request_error",
                        "file_not_found",
                        format!("No slot file {filename:?} in the slot save path"),
                    ));
                }
                // Strict: another model's or a damaged snapshot is an error
                // (session_mismatch, session_corrupt), not a prefill.
                let opts = RestoreOptions { fallback: false };
                let r = self.with_slot(*id, |s| s.restore(&path, opts))??;
                m.slot_restores.fetch_add(1, Ordering::Relaxed);
                self.touch(*id);
                if let Some(why) = &r.prefilled {
                    eprintln!(
                        "  slot {id}: {filename}: prefilled its {} tokens: {why}",
                        r.tokens
                    );
                }
                let mut doc = json!({
                    "id_slot": id,
                    "filename": filename,
                    "n_restored": r.tokens,
                    "n_read": r.file_bytes,
                    "timings": {"restore_ms": r.seconds * 1e3},
                });
                if let Some(why) = r.prefilled {
                    doc["prefilled"] = why.into();
                }
                doc
            }
            SlotRequest::Erase { id } => {
                let erased = self.erase(*id)?;
                json!({"id_slot": id, "n_erased": erased})
            }
        };
        Ok(done)
    }

    /// Run `f` on the session holding slot `id`'s cache (swapped in, then back out).
    fn with_slot<T>(&mut self, id: usize, f: impl FnOnce(&mut Session) -> T) -> crate::Result<T> {
        let at = self.position(id);
        if at > 0 {
            self.session.swap_slot(&mut self.parked[at - 1])?;
        }
        let out = f(&mut self.session);
        if at > 0 {
            self.session.swap_slot(&mut self.parked[at - 1])?;
        }
        Ok(out)
    }

    /// Empty slot `id` (its cache keeps its memory); the tokens it held.
    fn erase(&mut self, id: usize) -> crate::Result<usize> {
        let held = self.slot_tokens(id);
        self.with_slot(id, |s| s.rewind(0))?;
        let at = self.position(id);
        self.used[at] = 0;
        Ok(held)
    }

    /// Tokens slot `id` holds.
    fn slot_tokens(&self, id: usize) -> usize {
        match self.position(id) {
            0 => self.session.cached_tokens(),
            at => self.parked[at - 1].cached().len(),
        }
    }
}

/// Which of the caches (their tokens, when each was last used) a request of `prompt`
/// runs in. A cache whose tokens the prompt mostly continues (at least half of them,
/// llama.cpp's default slot similarity) is taken by the longest shared prefix; else the
/// least recently used one is, so that a new conversation does not evict one that
/// shares only a template header with it.
fn pick<'a>(prompt: &[u32], caches: impl Iterator<Item = (&'a [u32], u64)>) -> usize {
    let score = |cached: &[u32], used: u64| {
        let shared = common_prefix(cached, prompt);
        let continued = if 2 * shared >= cached.len() {
            shared
        } else {
            0
        };
        (continued, u64::MAX - used)
    };
    caches
        .enumerate()
        .max_by_key(|(_, (cached, used))| score(cached, *used))
        .map_or(0, |(i, _)| i)
}

/// Memory the system can still give (Linux: `MemAvailable`), if known.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::{check_filename, pick, SlotRequest};

    #[test]
    fn slot_file_names_are_plain_names_in_the_folder() {
        for ok in ["a.bin", "conv-1.session", "über chat", "x"] {
            assert!(check_filename(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(256);
        for bad in [
            "",
            "../x",
            "..",
            "a/b",
            "a\\b",
            "c:x",
            ".hidden",
            "a..b",
            "a\nb",
            " a",
            long.as_str(),
        ] {
            let e = check_filename(bad).unwrap_err();
            assert_eq!(e.error.param.as_deref(), Some("filename"), "{bad:?}");
            assert_eq!(e.status(), 400);
        }
    }

    #[test]
    fn slot_requests_check_the_id_action_and_body() {
        let body = r#"{"filename": "a.bin"}"#;
        assert_eq!(
            SlotRequest::parse("1", Some("save"), body, 2),
            Ok(SlotRequest::Save {
                id: 1,
                filename: "a.bin".into()
            })
        );
        assert_eq!(
            SlotRequest::parse("0", Some("erase"), "", 1),
            Ok(SlotRequest::Erase { id: 0 })
        );
        let param = |id, action, body| {
            SlotRequest::parse(id, action, body, 2)
                .unwrap_err()
                .error
                .param
                .unwrap_or_default()
        };
        assert_eq!(param("2", Some("save"), body), "id_slot");
        assert_eq!(param("x", Some("save"), body), "id_slot");
        assert_eq!(param("0", Some("load"), body), "action");
        assert_eq!(param("0", None, body), "action");
        assert_eq!(param("0", Some("restore"), "{}"), "filename");
        assert_eq!(
            param("0", Some("restore"), r#"{"filename": "../a"}"#),
            "filename"
        );
    }

    #[test]
    fn a_request_goes_to_the_cache_it_continues_else_to_the_least_recently_used() {
        let a: Vec<u32> = (50..90).collect();
        let b: Vec<u32> = (0..10).chain(100..140).collect();
        let empty: Vec<u32> = vec![];
        // A's next turn continues cache 1, used before cache 0: not chosen by recency.
        let next_a: Vec<u32> = (50..100).collect();
        let caches = [(b.as_slice(), 5), (a.as_slice(), 3)];
        assert_eq!(pick(&next_a, caches.into_iter()), 1);
        // A new conversation sharing a 10-token header with B (a fifth of it) evicts the
        // least recently used cache (A's), not B's.
        let c: Vec<u32> = (0..10).chain(200..240).collect();
        assert_eq!(pick(&c, caches.into_iter()), 1);
        let caches = [(a.as_slice(), 6), (b.as_slice(), 5)];
        assert_eq!(pick(&c, caches.into_iter()), 1);
        // B's next turn goes back to B's cache.
        let next_b: Vec<u32> = (0..10).chain(100..150).collect();
        assert_eq!(pick(&next_b, caches.into_iter()), 1);
        // An empty cache is free (never used): taken before evicting anything, but a
        // continued prefix wins over it.
        let caches = [(a.as_slice(), 3), (empty.as_slice(), 0), (b.as_slice(), 5)];
        assert_eq!(pick(&c, caches.into_iter()), 1);
        assert_eq!(pick(&next_a, caches.into_iter()), 0);
    }
}
