//! `--session FILE` of `run` and `chat`: the conversation's KV cache, tokens and chat in
//! a session snapshot ([`pocketrt::session`]), restored when the file exists and saved
//! when a reply is done. A snapshot of another backend (or another model of this
//! vocabulary, or with damaged rows) is prefilled from its tokens instead, said on
//! stderr; one that cannot be used at all is the command's error.

use pocketrt::api::{ChatMessage, Role};
use pocketrt::generate::Session;
use pocketrt::session::{encode_meta, Header, RestoreOptions, MAGIC};
use pocketrt::tokenizer::Message;
use pocketrt::{Error, Result};
use std::io::{Read, Write};
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
    let r = session.save(path)?;
    let mut meta = 0;
    if let Some(history) = chat {
        // The chat goes in as a meta record of its own after the session's (the last
        // one wins): `Session` takes its messages from its own `chat`, not from the
        // driven requests this command makes.
        let messages: Vec<Message> = history.iter().map(template_message).collect();
        let json = serde_json::to_string(&messages).expect("messages serialize");
        let record = encode_meta(&json);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        f.write_all(&record).map_err(|e| Error::io(path, e))?;
        meta = record.len();
    }
    if verbose {
        eprintln!(
            "session {}: saved {} tokens ({} positions, {} bytes written{}; file {} bytes) \
             in {:.1} ms",
            path.display(),
            r.tokens,
            r.positions,
            r.bytes_written + meta as u64,
            if r.rewrote { ", anew" } else { "" },
            r.file_bytes + meta as u64,
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
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = [0u8; 16];
    f.read_exact(&mut head).ok()?;
    if head[..8] != MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(head[12..16].try_into().ok()?) as usize;
    let mut json = vec![0; len.min(1 << 20)];
    f.read_exact(&mut json).ok()?;
    serde_json::from_slice::<Header>(&json)
        .ok()
        .map(|h| h.context)
}
