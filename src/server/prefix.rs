//! `--prefix-cache DIR`: snapshots of long system prompts, kept across restarts. A chat
//! request whose system messages render to at least `--prefix-cache-min-tokens` tokens
//! has a system prefix: the prompt's first tokens, as far as they equal the system
//! messages rendered alone. Its snapshot is `DIR/prefix-HASH.session`, the hash of the
//! model, the backend's KV rows and the prefix's tokens. Before the request runs in its
//! slot ([`super::slots`]'s routing):
//! - the snapshot exists and the slot holds less of the prefix: it is restored into the
//!   slot (the request's `cached_tokens` counts it);
//! - there is none and the slot holds no more of the prompt than the prefix: the slot
//!   is brought to hold exactly the prefix (its missing tokens run, one decode step past
//!   them, whose token is dropped) and saved. Those tokens were this request's work:
//!   its usage and stats count them as prompt tokens processed, not cached ([`Primed`]).

use super::State;
use crate::api::{ChatCompletionRequest, Content, Role};
use crate::engine::Engine;
use crate::generate::{common_prefix, GenerateOptions, GenerateStats, Session};
use crate::session::RestoreOptions;
use crate::tokenizer::{ChatOptions, Message};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Prompt tokens a request's slot was brought to hold before it ran (to save its system
/// prefix), and how long that took: processed for this request, not reused.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Primed {
    tokens: usize,
    seconds: f64,
}

impl Primed {
    /// `stats` of the request with the primed tokens counted as processed.
    pub fn apply(self, stats: &GenerateStats) -> GenerateStats {
        let mut s = stats.clone();
        let moved = self.tokens.min(s.reused_tokens);
        s.reused_tokens -= moved;
        s.prompt_seconds += self.seconds;
        s
    }
}

/// The system prefix of `req`, whose prompt is `prompt`: how many of the prompt's first
/// tokens its leading system messages render to; `None` when fewer than `min` (or none).
pub(super) fn system_prefix(
    req: &ChatCompletionRequest,
    session: &Session,
    prompt: &[u32],
    min: usize,
) -> Option<usize> {
    let template = session.template()?;
    let system: Vec<Message> = req
        .messages
        .iter()
        .take_while(|m| matches!(m.role, Role::System | Role::Developer))
        .map(|m| {
            let text = match &m.content {
                Some(Content::Text(t)) => t.clone(),
                Some(Content::Parts(parts)) => {
                    let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
                    texts.join("\n")
                }
                None => String::new(),
            };
            Message::system(text)
        })
        .collect();
    if system.is_empty() {
        return None;
    }
    let opts = ChatOptions::default();
    let text = template.render(&system, &opts).ok()?;
    let tokens = session.tokenizer().encode(&text, true);
    // Never the whole prompt: its last token is always run.
    let n = common_prefix(&tokens, prompt).min(prompt.len().saturating_sub(1));
    (n >= min.max(1)).then_some(n)
}

/// The snapshot file of `prefix` for `engine`'s model and KV rows.
fn prefix_path(dir: &Path, engine: &Engine, prefix: &[u32]) -> PathBuf {
    let mut h = Sha256::new();
    h.update(engine.model_id().as_bytes());
    h.update(b"\n");
    h.update(engine.kv_rows_tag().as_bytes());
    h.update(b"\n");
    for t in prefix {
        h.update(t.to_le_bytes());
    }
    let hex: String = h.finalize()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    dir.join(format!("prefix-{hex}.session"))
}

/// Before a request of `prompt`, whose first `n` tokens are a system prefix, runs in
/// `session`'s slot (which shares `shared` tokens with it): restore the prefix's
/// snapshot from `dir`, or save one. Returns the tokens the slot shares with the prompt
/// now, and those it ran to get there. A failure is logged and leaves the request to run
/// as it would have (a snapshot that cannot be restored is removed, to be saved again).
pub(super) fn use_prefix(
    session: &mut Session,
    dir: &Path,
    prompt: &[u32],
    n: usize,
    shared: usize,
    state: &State,
) -> (usize, Primed) {
    let path = prefix_path(dir, session.engine(), &prompt[..n]);
    let m = &state.metrics;
    let mut primed = Primed::default();
    if path.is_file() {
        if shared >= n {
            return (shared, primed);
        }
        match session.restore(&path, RestoreOptions::default()) {
            Ok(r) => {
                m.prefix_restores.fetch_add(1, Ordering::Relaxed);
                if state.opts.verbose {
                    eprintln!(
                        "  prefix cache: restored {} tokens from {} ({} bytes) in {:.1} ms",
                        r.tokens,
                        path.display(),
                        r.file_bytes,
                        r.seconds * 1e3
                    );
                }
            }
            Err(e) => {
                eprintln!("pocketrt serve: prefix cache: {e}; removing it");
                let _ = std::fs::remove_file(&path);
            }
        }
    } else if shared <= n {
        let opts = GenerateOptions {
            max_tokens: 1,
            ..GenerateOptions::default()
        };
        let t = Instant::now();
        let ran = session.generate_tokens(&prompt[..n], &opts, |_, _| true);
        primed = Primed {
            tokens: common_prefix(session.cached(), prompt).saturating_sub(shared),
            seconds: t.elapsed().as_secs_f64(),
        };
        match ran.and_then(|_| session.save(&path)) {
            Ok(r) => {
                m.prefix_saves.fetch_add(1, Ordering::Relaxed);
                if state.opts.verbose {
                    eprintln!(
                        "  prefix cache: saved {} tokens to {} ({} bytes) in {:.1} ms",
                        r.tokens,
                        path.display(),
                        r.file_bytes,
                        r.seconds * 1e3
                    );
                }
            }
            Err(e) => eprintln!("pocketrt serve: prefix cache: saving {n} tokens: {e}"),
        }
    }
    (common_prefix(session.cached(), prompt), primed)
}
