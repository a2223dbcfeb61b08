//! Session snapshots in the browser: the crate's format and save plan
//! (`crate::session`) on the web session, apart from where the bytes go (OPFS or Cache
//! Storage: `web/src/sessions.js`). A save hands JavaScript the bytes to append to the
//! snapshot's file (only the positions added since the last save, `Saved::plan`) or the
//! whole file; a restore takes the file's bytes and writes its KV rows into the cache
//! (no prefill) where this backend wrote them, else prefills its tokens — as the native
//! `Session::save` / `Session::restore` (`src/session/native.rs`) do on files.

use super::session::WebSession;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::format::package::{Manifest, TensorEntry};
use crate::format::package_source::{identity_bytes, source_tensors};
use crate::format::source::{ModelSource, SourceTensor};
use crate::quant::{MergeStats, Q4Tensor};
use crate::session::{
    encode_header, encode_kv, encode_meta, model_fingerprint, tokenizer_fingerprint, Header,
    RestorePlan, SavePlan, Saved, FORMAT,
};
use crate::tokenizer::Message;
use serde::Serialize;

/// Snapshot files a session keeps track of (the next save of each appends).
pub const TRACKED: usize = 8;

/// What identifies a loaded model, without its weights: the `ModelSource` a
/// [`model_fingerprint`] reads (container, config, tensor list, identity bytes), built
/// from what the browser's loader has instead of a source (a package's manifest, a GGUF
/// header).
pub struct Identity {
    container: String,
    config: ModelConfig,
    tensors: Vec<SourceTensor>,
    identity: Vec<u8>,
}

impl Identity {
    /// A pocket package: the fields the native `PackageSource` gives (so that a package
    /// has one identity natively and in the browser), its shard hashes as identity bytes.
    pub fn of_package(m: &Manifest) -> Identity {
        Identity {
            container: format!("pocket package ({} shards)", m.shards.len()),
            config: m.config.clone(),
            tensors: source_tensors(&m.tensors),
            identity: identity_bytes(m),
        }
    }

    /// A GGUF file as the browser converts it (GGUF has no hashes: its version, the
    /// converted tensors and the file's length).
    pub fn of_gguf(
        version: u32,
        config: &ModelConfig,
        tensors: &[TensorEntry],
        file_bytes: Option<u64>,
    ) -> Identity {
        Identity {
            container: format!("GGUF v{version}"),
            config: config.clone(),
            tensors: source_tensors(tensors),
            identity: file_bytes.unwrap_or(0).to_le_bytes().to_vec(),
        }
    }

    /// Hex SHA-256 of the model ([`model_fingerprint`]).
    pub fn fingerprint(&self) -> String {
        model_fingerprint(self)
    }
}

fn no_weights() -> Error {
    Error::InvalidArgument("a model's identity holds no weights".into())
}

impl ModelSource for Identity {
    fn config(&self) -> &ModelConfig {
        &self.config
    }
    fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }
    fn read_f32(&mut self, _: &str) -> Result<Vec<f32>> {
        Err(no_weights())
    }
    fn read_q4(&mut self, _: &str) -> Result<(Q4Tensor, MergeStats)> {
        Err(no_weights())
    }
    fn tokenizer_json(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
    fn chat_template(&self) -> Option<String> {
        None
    }
    fn container(&self) -> String {
        self.container.clone()
    }
    fn identity(&self) -> Vec<u8> {
        self.identity.clone()
    }
}

/// What a save hands JavaScript: the bytes to write and where.
pub struct Delta {
    /// The bytes, in parts (the header on a rewrite, the record of the new positions,
    /// the chat: not joined, which would copy the rows once more in wasm memory): to
    /// append at `at`, or the whole file.
    pub parts: Vec<Vec<u8>>,
    /// `parts` are the whole file (first save, another header or id, a file changed
    /// behind the session's back, or rollbacks compacted).
    pub rewrite: bool,
    /// Where `parts` go: the file's length before this save (0 on a rewrite).
    pub at: u64,
    /// Tokens of the history the file now restores to.
    pub tokens: usize,
    /// Positions whose rows this save wrote.
    pub positions: usize,
    /// The file's length after the write.
    pub file_bytes: u64,
}

/// What a restore did (to JavaScript, camelCase).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    /// Tokens of the restored history (the cache holds them all).
    pub tokens: usize,
    /// Of those, the tokens whose rows came from the snapshot (all, or none when
    /// prefilled).
    pub restored: usize,
    /// Why its tokens were prefilled instead (rows of another backend, profile or
    /// adapter; with `fallback`, another model or rows failing their checksum).
    pub prefilled: Option<String>,
    /// With `fallback`: what of the file was left out (its last save, cut short: a tab
    /// killed while it wrote); the saves before it were restored.
    pub dropped: Option<String>,
    /// The conversation saved with it (the last chat request's messages and reply).
    pub messages: Vec<Message>,
    /// Bytes of the snapshot read.
    pub file_bytes: u64,
}

impl WebSession {
    /// The header a snapshot of this session has (the web session's policy is per
    /// request: no sliding window).
    pub fn snapshot_header(&mut self) -> Header {
        let tokenizer = self
            .tokenizer_id
            .get_or_insert_with(|| tokenizer_fingerprint(&self.tokenizer))
            .clone();
        Header {
            format: FORMAT.into(),
            model: self.model_id.clone(),
            tokenizer,
            backend: self.model.kv_rows_tag(),
            layout: self.model.kv_layout(),
            context: self.model.context(),
            sliding_window_keep: None,
        }
    }

    /// The bytes that bring the snapshot `id` (a file of `file_bytes` now, `None`: no
    /// file) up to date with the conversation: when it is the file this session last
    /// saved or restored, a record of the positions added since and the chat, to append;
    /// else the whole file.
    pub async fn save_delta(&mut self, id: &str, file_bytes: Option<u64>) -> Result<Delta> {
        let header = self.snapshot_header();
        let saved = self
            .tracked(id)
            .filter(|s| Some(s.file_bytes) == file_bytes);
        let history = self.history().to_vec();
        let plan = Saved::plan(saved, &header, &history);
        let (start, at, head) = match plan {
            SavePlan::Append { start } => (start, saved.map_or(0, |s| s.file_bytes), None),
            SavePlan::Rewrite => (0, 0, Some(encode_header(&header))),
        };
        let tokens = &history[start..];
        let rows = self
            .model
            .read_kv(start, tokens.len(), history.len())
            .await?;
        let record = encode_kv(start, tokens, &rows);
        drop(rows);
        let messages = serde_json::to_string(&self.messages).expect("messages serialize");
        let parts: Vec<Vec<u8>> = head
            .into_iter()
            .chain([record, encode_meta(&messages)])
            .collect();
        let file_bytes = at + parts.iter().map(|p| p.len() as u64).sum::<u64>();
        let positions = tokens.len();
        let now = Saved {
            header,
            tokens: history.clone(),
            file_bytes,
        };
        self.track(id, Some(now));
        Ok(Delta {
            parts,
            rewrite: plan == SavePlan::Rewrite,
            at,
            tokens: history.len(),
            positions,
            file_bytes,
        })
    }

    /// What the file of snapshot `id` holds, when this session last saved or restored it.
    fn tracked(&self, id: &str) -> Option<&Saved> {
        self.snapshots.iter().find(|(i, _)| i == id).map(|(_, s)| s)
    }

    /// Keep what the file of snapshot `id` holds now (`None`: unknown).
    fn track(&mut self, id: &str, saved: Option<Saved>) {
        self.snapshots.retain(|(i, _)| i != id);
        if let Some(saved) = saved {
            if self.snapshots.len() == TRACKED {
                self.snapshots.remove(0);
            }
            self.snapshots.push((id.to_string(), saved));
        }
    }

    /// The file of snapshot `id` changed outside this session's saves.
    pub fn forget_snapshot(&mut self, id: &str) {
        self.track(id, None);
    }

    /// Restore the conversation saved as `id` from its file's bytes: its KV rows go
    /// into the cache as this backend wrote them (no prefill), else its tokens are
    /// prefilled (the cached prefix kept) and `prefilled` says why. Another tokenizer or
    /// version, or a history longer than the context: `SessionMismatch`; a truncated
    /// file or a failed checksum: `SessionCorrupt`; another model or corrupt rows too,
    /// unless `fallback` (then a prefill of its tokens; and a file whose last save was
    /// cut short restores the saves before it: `Compat::decide`, as natively). Nothing
    /// changes when it fails before the cache is written.
    pub async fn restore(&mut self, id: &str, data: Vec<u8>, fallback: bool) -> Result<Restored> {
        let what = format!("session snapshot {id:?}");
        let (ours, context) = (self.snapshot_header(), self.model.context());
        let plan = RestorePlan::open(data, &what, &ours, context, fallback)?;
        let snapshot = &plan.snapshot;
        let tokens = snapshot.tokens.clone();
        let restored = match &plan.prefilled {
            None => {
                self.write_history(&tokens, snapshot.rows())?;
                tokens.len()
            }
            Some(_) => {
                self.refill(&tokens).await?;
                0
            }
        };
        self.messages = plan.messages.clone();
        self.track(id, plan.saved(&ours));
        Ok(Restored {
            tokens: tokens.len(),
            restored,
            file_bytes: plan.snapshot.file_bytes() as u64,
            prefilled: plan.prefilled,
            dropped: plan.dropped,
            messages: plan.messages,
        })
    }
}
