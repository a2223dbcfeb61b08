//! Session snapshots: a conversation's KV cache, token history and settings in a file,
//! so that a chat survives a killed tab, a closed laptop or a restarted server without
//! re-reading the conversation through prefill. One format for every front end: the
//! native [`crate::Session`] (`Session::save` / `Session::restore`, the CLI's
//! `--session`, the server's slots), and the browser's `model.sessions` (OPFS).
//!
//! - `format.rs`: the bytes — a header (identity of the model, tokenizer and backend,
//!   the KV layout, `crate::engine::KvLayout`, the context and its policy), then
//!   records appended one per save: the positions added since the last save (their
//!   tokens and KV rows, bit for bit as the backend stores them), each part with its
//!   CRC-32; a `meta` record (the chat).
//! - `save.rs`: what a save writes: only the new positions, a rollback as a record
//!   that starts earlier, the whole file again when rewrites outgrow the live rows; and
//!   the opening of a restore (`RestorePlan::open`: parse, check, decide), shared by the
//!   native restore and the browser's (`web/snapshot.rs`).
//! - `native.rs`: `Session::save` / `restore` on files (not in the wasm build).
//!
//! A snapshot restores its rows only on the backend that wrote them (the same `backend`
//! string: CPU f32 rows, or a GPU profile's f16 rows on that adapter); elsewhere it falls
//! back to a prefill of its tokens and says so. Another model, tokenizer or version, a
//! history longer than the context: [`crate::Error::SessionMismatch`]; truncated or
//! failed checksums: [`crate::Error::SessionCorrupt`].

mod format;
mod identity;
#[cfg(not(target_arch = "wasm32"))]
mod native;
mod save;

#[cfg(test)]
mod tests;

pub use crate::format::model_fingerprint;
pub use format::{encode_header, encode_kv, encode_meta, Header, Snapshot, FORMAT, MAGIC, VERSION};
pub use identity::tokenizer_fingerprint;
#[cfg(not(target_arch = "wasm32"))]
pub use native::{RestoreOptions, Restored, SaveReport};
pub use save::{Compat, Restore, RestorePlan, SavePlan, Saved};
