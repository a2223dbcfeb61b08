//! Streaming decode: ids arrive one by one; text leaves only as complete UTF-8.
//!
//! A character split over several tokens (Chinese, emoji through byte tokens) is held back
//! until its last byte arrives. Bytes that can never become valid UTF-8 come out as U+FFFD
//! exactly as a whole decode would write them (`String::from_utf8_lossy`), so the
//! concatenated output of `push`es and `flush` equals `Tokenizer::decode` of all the ids.

use super::Tokenizer;
use crate::error::Result;

#[derive(Clone, Debug, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    skip_special: bool,
}

impl StreamDecoder {
    pub fn new(skip_special: bool) -> StreamDecoder {
        StreamDecoder {
            pending: Vec::new(),
            skip_special,
        }
    }

    /// Adds one id; returns the text completed by it (often empty for partial characters).
    /// An id outside the vocabulary is an error and changes nothing.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String> {
        let bytes = tok.token_output(id, self.skip_special)?;
        self.pending.extend_from_slice(bytes);
        Ok(self.take_complete())
    }

    /// Adds several ids; returns the text they complete.
    pub fn push_all(&mut self, tok: &Tokenizer, ids: &[u32]) -> Result<String> {
        let mut out = String::new();
        for &id in ids {
            out.push_str(&self.push(tok, id)?);
        }
        Ok(out)
    }

    /// Bytes held back (an incomplete character).
    pub fn pending_bytes(&self) -> &[u8] {
        &self.pending
    }

    /// Ends the stream: whatever is held back comes out (an unfinished character as U+FFFD).
    pub fn flush(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }

    fn take_complete(&mut self) -> String {
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // SAFETY-free: `good` was just validated by from_utf8.
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        // Invalid for good: one U+FFFD per maximal bad run, as lossy does.
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &bad[n..];
                        }
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drop = self.pending.len() - keep;
        self.pending.drain(..drop);
        out
    }
}
