//! What vocabulary pruning needs from a tokenizer: how each token is produced (its BPE merge
//! parents), whether its own text encodes to it, and a copy restricted to a kept set of ids.
//!
//! A token's parents are read off BPE itself: BPE runs on the token's bytes and the last
//! merge it applies is the one that builds the token. Keeping every kept token's parents
//! (recursively) keeps every merge of that run; since the pruned merges are a subset of the
//! original ones in the same rank order, BPE then applies exactly the same merges to that
//! text — the token stays producible, and any word whose original tokens are all kept
//! encodes exactly as before.

use super::{bytelevel, terr, Parts, Tokenizer, ADDED, IN_MODEL};
use crate::error::Result;

/// How a token id comes out of the tokenizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenOrigin {
    /// No token has this id (a hole in the id range).
    Hole,
    /// One of the single-byte tokens BPE starts from.
    Byte,
    /// An added or special token (matched in the text before BPE).
    Added,
    /// BPE builds it: the last merge BPE applies to its bytes joins `left` and `right`.
    Merged { left: u32, right: u32 },
    /// Emitted whole by HF `ignore_merges` although no merge sequence builds it.
    WholeWord,
    /// BPE turns its bytes into other tokens: it is never produced.
    Unreachable,
}

impl Tokenizer {
    /// The origin of every id in `0..vocab_size()`.
    pub fn token_origins(&self) -> Vec<TokenOrigin> {
        let byte_ids = self.byte_ids();
        let mut out = Vec::new();
        let mut trace = Vec::new();
        (0..self.vocab_size() as u32)
            .map(|id| {
                let flags = self.flags[id as usize];
                if flags & ADDED != 0 {
                    return TokenOrigin::Added;
                }
                if flags & IN_MODEL == 0 {
                    return TokenOrigin::Hole;
                }
                let bytes = self.token_bytes(id).unwrap_or_default();
                if bytes.len() == 1 && byte_ids[bytes[0] as usize] == Some(id) {
                    return TokenOrigin::Byte;
                }
                out.clear();
                trace.clear();
                self.bpe.trace_word(bytes, &mut out, &mut trace);
                match trace.last() {
                    Some(&(left, right, merged)) if out == [id] && merged == id => {
                        TokenOrigin::Merged { left, right }
                    }
                    _ if self.ignore_merges => TokenOrigin::WholeWord,
                    _ => TokenOrigin::Unreachable,
                }
            })
            .collect()
    }

    /// BPE (or HF `ignore_merges`' whole-word match) on the bytes of one pre-token: no added
    /// tokens, normalization or pre-tokenization.
    pub fn encode_word(&self, word: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        self.bpe.encode_word(word, &mut out);
        out
    }

    /// Whether encoding the token's own text (without special additions) gives exactly this
    /// token. False for ids whose bytes are not UTF-8 text.
    pub fn encodes_to_itself(&self, id: u32) -> bool {
        self.token_bytes(id)
            .and_then(|b| std::str::from_utf8(b).ok())
            .is_some_and(|text| self.encode(text, false) == [id])
    }

    /// The ids of the 256 single-byte tokens (`None` where the vocabulary lacks one).
    pub fn byte_ids(&self) -> [Option<u32>; 256] {
        let mut ids = [None; 256];
        for (b, slot) in ids.iter_mut().enumerate() {
            let c = bytelevel::byte_to_char(b as u8);
            *slot = self
                .model_ids
                .get(c.encode_utf8(&mut [0; 4]) as &str)
                .copied();
        }
        ids
    }

    /// A tokenizer holding only the ids in `keep` (strictly increasing), renumbered `0..` in
    /// that order. Merges whose parts or result are dropped are dropped; the other merges
    /// keep their order. The ids put around a text, BOS, EOS and PAD must all be kept.
    pub fn retain(&self, keep: &[u32]) -> Result<Tokenizer> {
        let n = self.vocab_size();
        let mut new_id = vec![None; n];
        for (i, &old) in keep.iter().enumerate() {
            if i > 0 && keep[i - 1] >= old {
                return Err(terr("retain: the kept ids are not strictly increasing"));
            }
            let flags = self.flags.get(old as usize).copied().unwrap_or(0);
            if flags & (IN_MODEL | ADDED) == 0 {
                return Err(terr(format!("retain: id {old} is not a token")));
            }
            new_id[old as usize] = Some(i as u32);
        }
        let map = |id: u32| new_id.get(id as usize).copied().flatten();
        let vocab: Vec<(String, u32)> = self
            .model_ids
            .iter()
            .filter_map(|(piece, &id)| Some((piece.clone(), map(id)?)))
            .collect();
        // The model's own piece per id (an added token may share an id with one).
        let mut model_piece = vec![None; n];
        for (piece, &id) in &self.model_ids {
            model_piece[id as usize] = Some(piece.as_str());
        }
        let mut merges = Vec::new();
        for &(a, b) in &self.merges {
            let (Some(pa), Some(pb)) = (model_piece[a as usize], model_piece[b as usize]) else {
                continue;
            };
            let result = self.model_ids.get(&format!("{pa}{pb}")).copied();
            if map(a).is_some() && map(b).is_some() && result.and_then(map).is_some() {
                merges.push((pa.to_string(), pb.to_string()));
            }
        }
        let added = self
            .added
            .tokens()
            .iter()
            .filter_map(|t| {
                let mut t = t.clone();
                t.id = map(t.id)?;
                Some(t)
            })
            .collect();
        let must = |id: u32, what: &str| {
            map(id).ok_or_else(|| terr(format!("retain: the {what} id {id} is not kept")))
        };
        let must_all = |ids: &[u32], what: &str| -> Result<Vec<u32>> {
            ids.iter().map(|&id| must(id, what)).collect()
        };
        Tokenizer::build(Parts {
            vocab,
            merges,
            added,
            nfc: self.nfc,
            pre: self.pre.specs().to_vec(),
            ignore_merges: self.ignore_merges,
            prefix: must_all(&self.prefix, "prefix")?,
            suffix: must_all(&self.suffix, "suffix")?,
            bos: self.bos.map(|id| must(id, "BOS")).transpose()?,
            eos: must_all(&self.eos, "EOS")?,
            pad: self.pad.map(|id| must(id, "PAD")).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes a, b, c, space; merges a b → ab, ab c → abc, Ġ a → Ġa; one special token.
    fn toy() -> Tokenizer {
        let json = r#"{"model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"Ġ":3,"ab":4,"abc":5,
            "Ġa":6,"bc":7},"merges":["a b","ab c","Ġ a"]},
            "added_tokens":[{"id":8,"content":"<|endoftext|>","special":true}],
            "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
            "decoder":{"type":"ByteLevel"}}"#;
        Tokenizer::from_hf_json(json).unwrap()
    }

    #[test]
    fn origins_name_bytes_merge_parents_specials_and_unreachable_tokens() {
        let t = toy();
        let o = t.token_origins();
        assert_eq!(o[0], TokenOrigin::Byte);
        assert_eq!(o[4], TokenOrigin::Merged { left: 0, right: 1 });
        assert_eq!(o[5], TokenOrigin::Merged { left: 4, right: 2 });
        // No merge builds "bc".
        assert_eq!(o[7], TokenOrigin::Unreachable);
        assert_eq!(o[8], TokenOrigin::Added);
        assert!(t.encodes_to_itself(5) && !t.encodes_to_itself(7));
    }

    #[test]
    fn retain_renumbers_drops_dependent_merges_and_keeps_special_ids_valid() {
        let t = toy();
        // Keep a, b, c, Ġ, ab, <|end|>: "abc" and "Ġa" go, and with them their merges.
        let p = t.retain(&[0, 1, 2, 3, 4, 8]).unwrap();
        assert_eq!(p.vocab_size(), 6);
        assert_eq!(p.merges, vec![(0, 1)]);
        assert_eq!(p.encode("abc a<|endoftext|>", false), vec![4, 2, 3, 0, 5]);
        assert_eq!(p.decode(&p.encode("abc a", false), false).unwrap(), "abc a");
        assert_eq!(p.eos_ids(), &[5]);
        assert!(t.retain(&[0, 1, 2, 3, 4]).is_err(), "EOS dropped");
        assert!(t.retain(&[1, 0]).is_err(), "not increasing");
        assert!(t.retain(&[0, 99]).is_err(), "not a token");
    }
}
