//! `--session FILE` of `run` and `chat`: the conversation's KV cache, tokens and chat in
//! a session snapshot ([`pocketrt::session`]), restored when the file exists and saved
//! when a reply is done. A snapshot of another backend (or another model of this
//! vocabulary, or with damaged rows) is prefilled from its tokens instead, said on
//! stderr; one that cannot be used at all is the command's error.

use pocketrt::api::{ChatMessage, Role};
use pocketrt::generate::Session;
use pocketrt::session::{Header, RestoreOptions};
use pocketrt::tokenizer::Message;
use pocketrt::Result;
use std::io::Read;
use std::path::Path;

/// Restore `path` into `session` if the file exists (false: a new session).
pub fn restore(session: &mut Session, path: &Path, verbose: bool) -> Result<bool> {
    if !path.exists() {
        if verbose {
            eprintln!("session {}: new (saved when done)", path.display());
        }
        return Ok(false);
    }
    let r = session.restore(path, RestoreOptions { fallback: true })?;
    if let Some(why) = &r.prefilled {
        eprintln!(
            "session {}: prefilled its {} tokens instead of restoring their KV rows: {why}",
            path.display(),
            r.tokens
        );
    }
    if let Some(what) = &r.dropped {
        eprintln!(
            "session {}: its last save was cut short, restored the saves before it ({what})",
            path.display()
        );
    }
    if verbose {
        eprintln!(
            "session {}: restored {} tokens ({} of them as KV rows; {} bytes) in {:.1} ms",
            path.display(),
            r.tokens,
            r.restored,
            r.file_bytes,
            r.seconds * 1e3
        );
    }
    Ok(true)
}

/// Save `session` to `path`; with `chat`, the chat to restore with it.
pub fn save(
    session: &mut Session,
    path: &Path,
    chat: Option<&[ChatMessage]>,
    verbose: bool,
) -> Result<()> {
    if let Some(history) = chat {
        // `chat` drives its requests itself: the session keeps the chat they make.
        session.set_messages(history.iter().map(template_message).collect());
    }
    let r = session.save(path)?;
    if verbose {
        eprintln!(
            "session {}: saved {} tokens ({} positions, {} bytes written{}; file {} bytes) \
             in {:.1} ms",
            path.display(),
            r.tokens,
            r.positions,
            r.bytes_written,
            if r.rewrote { ", anew" } else { "" },
            r.file_bytes,
            r.seconds * 1e3
        );
    }
    Ok(())
}

/// The chat a restored session holds, as `chat`'s history.
pub fn history(session: &Session) -> Vec<ChatMessage> {
    let role = |r: &str| match r {
        "system" => Role::System,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => Role::User,
    };
    let messages = session.messages().iter();
    messages
        .map(|m| ChatMessage::new(role(&m.role), &m.content))
        .collect()
}

fn template_message(m: &ChatMessage) -> Message {
    let text = match &m.content {
        Some(pocketrt::api::Content::Text(t)) => t.clone(),
        _ => String::new(),
    };
    Message::new(m.role.template_name(), text)
}

/// The context the snapshot at `path` was saved with (its header), if it is one.
pub fn saved_context(path: &Path) -> Option<usize> {
    let mut head = Vec::new();
    let f = std::fs::File::open(path).ok()?;
    f.take(1 << 20).read_to_end(&mut head).ok()?;
    let (header, _) = Header::read(&head, &path.display().to_string()).ok()?;
    Some(header.context)
}
