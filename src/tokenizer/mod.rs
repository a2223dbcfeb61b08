//! Byte-level BPE tokenizer (HF tokenizer.json or GGUF metadata) and chat templates.
//!
//! Encoding, as in HF `tokenizers`: added tokens are cut out of the raw text first
//! ([`added`]), the rest is NFC-normalized when the model says so, pre-tokenized by regex
//! ([`pretokenize`]) and each word is BPE-merged over its bytes ([`bpe`]). Token ids map back
//! to bytes through GPT-2's byte ↔ char table ([`bytelevel`]).
//!
//! Loading: [`Tokenizer::from_hf_json`] ([`hf`]), [`Tokenizer::from_gguf`] ([`gguf`]); a
//! loaded tokenizer exports itself as an HF tokenizer.json with [`Tokenizer::to_hf_json`].

pub mod added;
pub mod bpe;
pub mod bytelevel;
pub mod chat;
pub mod fastsplit;
mod gguf;
mod hf;
pub mod pretokenize;
mod prune;
mod pyjson;
pub mod streaming;

pub use added::AddedToken;
pub use chat::{ChatOptions, ChatTemplate, Message};
pub use hf::byte_level_json;
pub use prune::TokenOrigin;
pub use streaming::StreamDecoder;

use crate::constrain::{TokenTrie, Vocabulary};
use crate::error::{Error, Result};
use added::{AddedVocab, Segment};
use bpe::{Bpe, FxMap};
use pretokenize::{PreTokenizer, StepSpec};
use std::borrow::Cow;
use std::collections::HashMap;
use unicode_normalization::UnicodeNormalization;

/// Flags of one id.
const IN_MODEL: u8 = 1;
const ADDED: u8 = 2;
const SPECIAL: u8 = 4;

/// What a loader found, before it is turned into a [`Tokenizer`].
pub(crate) struct Parts {
    /// The BPE model's vocabulary: byte-level piece and id.
    pub vocab: Vec<(String, u32)>,
    /// Merges in rank order, as pieces.
    pub merges: Vec<(String, String)>,
    pub added: Vec<AddedToken>,
    pub nfc: bool,
    pub pre: Vec<StepSpec>,
    pub ignore_merges: bool,
    /// Ids put before / after the text by `encode(.., add_special = true)`.
    pub prefix: Vec<u32>,
    pub suffix: Vec<u32>,
    pub bos: Option<u32>,
    pub eos: Vec<u32>,
    pub pad: Option<u32>,
}

/// A byte-level BPE tokenizer. Cheap to share (`&self` everywhere; the word cache is
/// internally locked).
pub struct Tokenizer {
    /// id → the model's piece (byte-level text) or the added token's content; "" for holes.
    pieces: Vec<String>,
    flags: Vec<u8>,
    /// id → decoded bytes: `bytes[offsets[id]..offsets[id + 1]]`.
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    model_ids: HashMap<String, u32>,
    /// Merges in rank order (ids), kept for export.
    merges: Vec<(u32, u32)>,
    bpe: Bpe,
    added: AddedVocab,
    nfc: bool,
    pre: PreTokenizer,
    ignore_merges: bool,
    prefix: Vec<u32>,
    suffix: Vec<u32>,
    bos: Option<u32>,
    eos: Vec<u32>,
    pad: Option<u32>,
    /// The constrained-decoding trie, built on first use ([`Tokenizer::token_trie`]).
    trie: std::sync::OnceLock<std::sync::Arc<TokenTrie>>,
}

fn terr(msg: impl Into<String>) -> Error {
    Error::Tokenizer(msg.into())
}

impl Tokenizer {
    /// Loads an HF `tokenizer.json` (BPE model with byte-level pre-tokenizer and decoder).
    pub fn from_hf_json(json: &str) -> Result<Tokenizer> {
        hf::parse(json).and_then(Tokenizer::build)
    }

    /// Like [`Tokenizer::from_hf_json`] from raw bytes (invalid UTF-8 is an error).
    pub fn from_hf_json_bytes(json: &[u8]) -> Result<Tokenizer> {
        let s = std::str::from_utf8(json)
            .map_err(|e| terr(format!("tokenizer.json is not valid UTF-8: {e}")))?;
        Tokenizer::from_hf_json(s)
    }

    /// Loads the tokenizer from GGUF metadata (`tokenizer.ggml.*`, model "gpt2").
    pub fn from_gguf(g: &crate::format::gguf::Gguf) -> Result<Tokenizer> {
        gguf::parse(g).and_then(Tokenizer::build)
    }

    /// Exports an HF `tokenizer.json` that loads back (here or in HF `tokenizers`) into a
    /// tokenizer that encodes and decodes identically.
    pub fn to_hf_json(&self) -> String {
        hf::export(self)
    }

    pub(crate) fn build(p: Parts) -> Result<Tokenizer> {
        let max_id = p
            .vocab
            .iter()
            .map(|(_, id)| *id)
            .chain(p.added.iter().map(|t| t.id))
            .max()
            .ok_or_else(|| terr("the vocabulary is empty"))?;
        let entries = p.vocab.len() + p.added.len();
        // Ids may have holes, but not so many that a bogus id makes us allocate gigabytes.
        if max_id as usize >= entries.saturating_mul(2).saturating_add(1024) {
            return Err(terr(format!(
                "token id {max_id} is far beyond the {entries} tokens defined"
            )));
        }
        let n = max_id as usize + 1;
        let mut pieces = vec![String::new(); n];
        let mut flags = vec![0u8; n];
        let mut model_ids = HashMap::with_capacity(p.vocab.len());
        for (piece, id) in p.vocab {
            let i = id as usize;
            if flags[i] & IN_MODEL != 0 {
                return Err(terr(format!(
                    "id {id} is used by two vocabulary tokens ({:?} and {piece:?})",
                    pieces[i]
                )));
            }
            if model_ids.insert(piece.clone(), id).is_some() {
                return Err(terr(format!("vocabulary token {piece:?} appears twice")));
            }
            flags[i] |= IN_MODEL;
            pieces[i] = piece;
        }
        for t in &p.added {
            let i = t.id as usize;
            if t.content.is_empty() {
                return Err(terr(format!("added token {} has empty content", t.id)));
            }
            // An added token may be a vocabulary token (same id, same content), but it must
            // not take another token's id: that token would decode as the added one.
            if flags[i] & (IN_MODEL | ADDED) != 0 && pieces[i] != t.content {
                return Err(terr(format!(
                    "added token {:?} has id {}, the id of {:?}",
                    t.content, t.id, pieces[i]
                )));
            }
            flags[i] |= ADDED | if t.special { SPECIAL } else { 0 };
            pieces[i].clone_from(&t.content);
        }
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0u32);
        for piece in &pieces {
            bytes.extend_from_slice(&bytelevel::decode_piece(piece));
            let off = u32::try_from(bytes.len()).map_err(|_| terr("vocabulary too large"))?;
            offsets.push(off);
        }

        let lookup = |s: &str, what: &str| -> Result<u32> {
            model_ids
                .get(s)
                .copied()
                .ok_or_else(|| terr(format!("merge {what} {s:?} is not in the vocabulary")))
        };
        let mut merges = Vec::with_capacity(p.merges.len());
        let mut triples = Vec::with_capacity(p.merges.len());
        for (a, b) in &p.merges {
            let (ia, ib) = (lookup(a, "part")?, lookup(b, "part")?);
            let im = lookup(&format!("{a}{b}"), "result")?;
            merges.push((ia, ib));
            triples.push((ia, ib, im));
        }
        let mut byte_ids = [None; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = model_ids
                .get(bytelevel::byte_to_char(b as u8).encode_utf8(&mut [0; 4]) as &str)
                .copied();
        }
        let whole_words = p.ignore_merges.then(|| {
            let mut m = FxMap::default();
            for (piece, &id) in &model_ids {
                m.insert(bytelevel::decode_piece(piece), id);
            }
            m
        });
        for &id in p
            .prefix
            .iter()
            .chain(&p.suffix)
            .chain(&p.eos)
            .chain(p.bos.iter())
        {
            if id as usize >= n {
                return Err(terr(format!(
                    "special token id {id} is not in the vocabulary"
                )));
            }
        }
        Ok(Tokenizer {
            pieces,
            flags,
            bytes,
            offsets,
            model_ids,
            merges,
            bpe: Bpe::new(&triples, byte_ids, whole_words),
            added: AddedVocab::new(p.added),
            nfc: p.nfc,
            pre: PreTokenizer::new(p.pre)?,
            ignore_merges: p.ignore_merges,
            prefix: p.prefix,
            suffix: p.suffix,
            bos: p.bos,
            eos: p.eos,
            pad: p.pad,
            trie: Default::default(),
        })
    }

    /// The token trie of constrained decoding with end-of-sequence ids `eos`, built once
    /// and kept with the tokenizer (built again, not kept, for other `eos`).
    pub fn token_trie(&self, eos: &[u32]) -> Result<std::sync::Arc<TokenTrie>> {
        let build = || TokenTrie::new(self, eos).map(std::sync::Arc::new);
        if let Some(t) = self.trie.get() {
            let want = if eos.is_empty() { self.eos_ids() } else { eos };
            if t.eos() == want {
                return Ok(t.clone());
            }
            return build();
        }
        let t = build()?;
        Ok(self.trie.get_or_init(|| t).clone())
    }

    /// Text → ids. Added and special tokens written in the text (`<|im_start|>`) become their
    /// ids. `add_special` adds what the model puts around a text (BOS when it wants one).
    pub fn encode(&self, text: &str, add_special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 4);
        if add_special {
            out.extend_from_slice(&self.prefix);
        }
        let mut raw = Vec::new();
        self.added.split_raw(text, &mut raw);
        for seg in raw {
            match seg {
                Segment::Token(id) => out.push(id),
                Segment::Text(t) => self.encode_text(t, &mut out),
            }
        }
        if add_special {
            out.extend_from_slice(&self.suffix);
        }
        out
    }

    fn encode_text(&self, text: &str, out: &mut Vec<u32>) {
        let text: Cow<str> = if self.nfc && !unicode_normalization::is_nfc(text) {
            Cow::Owned(text.nfc().collect())
        } else {
            Cow::Borrowed(text)
        };
        if !self.added.has_normalized() {
            return self.encode_plain(&text, out);
        }
        let mut segs = Vec::new();
        self.added.split_normalized(&text, &mut segs);
        for seg in segs {
            match seg {
                Segment::Token(id) => out.push(id),
                Segment::Text(t) => self.encode_plain(t, out),
            }
        }
    }

    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        let spaced;
        let text = if self.pre.prefix_space(text) {
            spaced = format!(" {text}");
            &spaced
        } else {
            text
        };
        self.pre
            .split(text, &mut |word| self.bpe.encode_word(word.as_bytes(), out));
    }

    /// The bytes of one token, `None` for an id outside the vocabulary.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        let (s, e) = (*self.offsets.get(i)?, *self.offsets.get(i + 1)?);
        self.bytes.get(s as usize..e as usize)
    }

    /// Ids → bytes. An id outside the vocabulary is an error; with `skip_special`, special
    /// (control) tokens are left out.
    pub fn decode_bytes(&self, ids: &[u32], skip_special: bool) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.token_output(id, skip_special)?);
        }
        Ok(out)
    }

    /// What `id` contributes to decoded output.
    pub(crate) fn token_output(&self, id: u32, skip_special: bool) -> Result<&[u8]> {
        let b = self.token_bytes(id).ok_or_else(|| {
            terr(format!(
                "token id {id} is outside the vocabulary (size {})",
                self.vocab_size()
            ))
        })?;
        Ok(if skip_special && self.is_special(id) {
            &[]
        } else {
            b
        })
    }

    /// Ids → text. Invalid UTF-8 (a character cut off by the id list) becomes U+FFFD, as in
    /// HF. An id outside the vocabulary is an error (`Error::Tokenizer`).
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids, skip_special)?).into_owned())
    }

    /// The text of one token (lossy for a token that is part of a UTF-8 character), `None`
    /// for an id outside the vocabulary.
    pub fn token_to_piece(&self, id: u32) -> Option<String> {
        self.token_bytes(id)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// The vocabulary entry of an id as stored (byte-level text such as `Ġthe`, or an added
    /// token's content).
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    /// The id of a vocabulary entry or added token, given as stored (`Ġthe`, `<|im_end|>`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.added
            .tokens()
            .iter()
            .find(|t| t.content == token)
            .map(|t| t.id)
            .or_else(|| self.model_ids.get(token).copied())
    }

    /// Ids span `0..vocab_size()` (the model's embedding may be larger).
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.flags
            .get(id as usize)
            .is_some_and(|f| f & SPECIAL != 0)
    }

    pub fn added_tokens(&self) -> &[AddedToken] {
        self.added.tokens()
    }

    /// Ids that end generation. From GGUF: eos, eot and eom ids. From tokenizer.json (which
    /// does not name them): those of `<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`,
    /// `<|end_of_text|>`, `</s>` that are special tokens; [`Tokenizer::set_eos_ids`]
    /// overrides them from the model's config.
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn pad_id(&self) -> Option<u32> {
        self.pad
    }

    /// Sets the end-of-generation ids (e.g. from config.json / generation_config.json).
    pub fn set_eos_ids(&mut self, ids: Vec<u32>) -> Result<()> {
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= self.vocab_size()) {
            return Err(terr(format!("eos id {bad} is outside the vocabulary")));
        }
        self.eos = ids;
        self.trie = Default::default();
        Ok(())
    }
}

/// The vocabulary as constrained decoding's trie reads it ([`Tokenizer::token_trie`]).
impl Vocabulary for Tokenizer {
    fn vocab_size(&self) -> usize {
        Tokenizer::vocab_size(self)
    }
    fn eos_ids(&self) -> &[u32] {
        Tokenizer::eos_ids(self)
    }
    fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        Tokenizer::token_bytes(self, id)
    }
    fn is_special(&self, id: u32) -> bool {
        Tokenizer::is_special(self, id)
    }
    fn id_to_token(&self, id: u32) -> Option<&str> {
        Tokenizer::id_to_token(self, id)
    }
}

/// Ids with their text, for printing (like llama.cpp's `llama-tokenize`); an id outside the
/// vocabulary shows as `<invalid id>`.
pub fn describe_tokens(tok: &Tokenizer, ids: &[u32]) -> Vec<(u32, String)> {
    ids.iter()
        .map(|&id| {
            let piece = tok
                .token_to_piece(id)
                .unwrap_or_else(|| "<invalid id>".to_string());
            (id, piece)
        })
        .collect()
}
