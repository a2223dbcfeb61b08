//! The BPE merge algorithm over bytes.
//!
//! A word (one pre-token) starts as one symbol per byte; the pair of neighbours with the
//! lowest merge rank is merged until no neighbouring pair has a merge. Like HF `tokenizers`,
//! this runs on a linked list of symbols with a binary heap of candidate merges (stale
//! entries are skipped when popped), so a word of n bytes costs O(n log n), and ties go to
//! the leftmost pair. Results for short words are cached.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

/// A small, fast, non-cryptographic hasher (FxHash) for the merge and cache maps: the keys
/// come from the model and the text, and flooding them only costs speed.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Words longer than this (bytes) are not cached.
const CACHE_MAX_WORD: usize = 64;
/// The cache is emptied when it reaches this many entries.
const CACHE_MAX_ENTRIES: usize = 200_000;

pub struct Bpe {
    /// (left id, right id) packed as `left << 32 | right` → (rank, merged id).
    merges: FxMap<u64, (u32, u32)>,
    /// The id of each single byte's token (`None` when the vocab lacks it: such bytes are
    /// dropped, as HF does for a BPE model without an unknown token).
    byte_ids: [Option<u32>; 256],
    /// HF `ignore_merges`: a word that is itself a token is emitted whole.
    whole_words: Option<FxMap<Vec<u8>, u32>>,
    cache: Mutex<FxMap<Vec<u8>, Vec<u32>>>,
}

#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    prev: u32,
    next: u32,
    alive: bool,
}

const NONE: u32 = u32::MAX;

fn pair_key(a: u32, b: u32) -> u64 {
    ((a as u64) << 32) | b as u64
}

impl Bpe {
    /// `merges[rank] = (left, right, merged)`; `byte_ids[b]` the id of byte b's token;
    /// `whole_words` the byte → id map of the vocab when HF `ignore_merges` is set.
    pub fn new(
        merges: &[(u32, u32, u32)],
        byte_ids: [Option<u32>; 256],
        whole_words: Option<FxMap<Vec<u8>, u32>>,
    ) -> Bpe {
        let mut map = FxMap::default();
        map.reserve(merges.len());
        for (rank, &(a, b, m)) in merges.iter().enumerate() {
            // A repeated pair keeps its first (lowest) rank, as in HF.
            map.entry(pair_key(a, b)).or_insert((rank as u32, m));
        }
        Bpe {
            merges: map,
            byte_ids,
            whole_words,
            cache: Mutex::new(FxMap::default()),
        }
    }

    fn merge_of(&self, a: u32, b: u32) -> Option<(u32, u32)> {
        self.merges.get(&pair_key(a, b)).copied()
    }

    /// Appends the ids of one word (the raw bytes of a pre-token) to `out`.
    pub fn encode_word(&self, word: &[u8], out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if let Some(ww) = &self.whole_words {
            if let Some(&id) = ww.get(word) {
                out.push(id);
                return;
            }
        }
        let cacheable = word.len() <= CACHE_MAX_WORD;
        if cacheable {
            if let Ok(cache) = self.cache.try_lock() {
                if let Some(ids) = cache.get(word) {
                    out.extend_from_slice(ids);
                    return;
                }
            }
        }
        let start = out.len();
        self.merge_word(word, out, None);
        if cacheable {
            if let Ok(mut cache) = self.cache.try_lock() {
                if cache.len() >= CACHE_MAX_ENTRIES {
                    cache.clear();
                }
                cache.insert(word.to_vec(), out[start..].to_vec());
            }
        }
    }

    /// Runs BPE on `word` (no whole-word shortcut, no cache), appending the ids to `out` and
    /// every merge applied, in order, as `(left, right, merged)` to `trace`.
    pub fn trace_word(&self, word: &[u8], out: &mut Vec<u32>, trace: &mut Vec<(u32, u32, u32)>) {
        self.merge_word(word, out, Some(trace));
    }

    fn merge_word(
        &self,
        word: &[u8],
        out: &mut Vec<u32>,
        mut trace: Option<&mut Vec<(u32, u32, u32)>>,
    ) {
        let mut syms: Vec<Symbol> = Vec::with_capacity(word.len());
        for &b in word {
            if let Some(id) = self.byte_ids[b as usize] {
                let i = syms.len() as u32;
                syms.push(Symbol {
                    id,
                    prev: if i == 0 { NONE } else { i - 1 },
                    next: i + 1,
                    alive: true,
                });
            }
        }
        let Some(last) = syms.last_mut() else { return };
        last.next = NONE;
        if syms.len() == 1 {
            out.push(syms[0].id);
            return;
        }

        // Candidate merges: (rank, left position, merged id); Reverse makes it a min-heap,
        // so equal ranks pop leftmost first.
        let mut heap = BinaryHeap::with_capacity(syms.len());
        for i in 0..syms.len() - 1 {
            if let Some((rank, m)) = self.merge_of(syms[i].id, syms[i + 1].id) {
                heap.push(Reverse((rank, i as u32, m)));
            }
        }
        while let Some(Reverse((rank, pos, merged))) = heap.pop() {
            let p = pos as usize;
            let left = syms[p];
            if !left.alive || left.next == NONE {
                continue;
            }
            let r = left.next as usize;
            // Stale entry: a neighbour changed since it was pushed.
            if self.merge_of(left.id, syms[r].id) != Some((rank, merged)) {
                continue;
            }
            if let Some(t) = trace.as_deref_mut() {
                t.push((left.id, syms[r].id, merged));
            }
            syms[p].id = merged;
            syms[p].next = syms[r].next;
            syms[r].alive = false;
            if syms[r].next != NONE {
                let n = syms[r].next as usize;
                syms[n].prev = pos;
                if let Some((rk, m)) = self.merge_of(merged, syms[n].id) {
                    heap.push(Reverse((rk, pos, m)));
                }
            }
            if left.prev != NONE {
                let q = left.prev as usize;
                if let Some((rk, m)) = self.merge_of(syms[q].id, merged) {
                    heap.push(Reverse((rk, left.prev, m)));
                }
            }
        }
        let mut i = 0u32;
        while i != NONE {
            out.push(syms[i as usize].id);
            i = syms[i as usize].next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte tokens are ids 0..256 (id = byte); merged tokens from 256 on.
    fn toy(merges: &[(u32, u32, u32)]) -> Bpe {
        let mut byte_ids = [None; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = Some(b as u32);
        }
        Bpe::new(merges, byte_ids, None)
    }

    #[test]
    fn lowest_rank_merges_first_and_ties_go_left() {
        let a = b'a' as u32;
        let b = b'b' as u32;
        // rank 0: a a → 256, rank 1: 256 a → 257, rank 2: a b → 258
        let bpe = toy(&[(a, a, 256), (256, a, 257), (a, b, 258)]);
        let mut out = Vec::new();
        bpe.encode_word(b"aaa", &mut out);
        assert_eq!(out, vec![257]); // (aa)a, not a(aa)
        out.clear();
        bpe.encode_word(b"aaab", &mut out);
        // aa is rank 0 at pos 0 → [aa, a, b]; then "aa a" rank 1 → [aaa, b].
        assert_eq!(out, vec![257, b]);
        out.clear();
        bpe.encode_word(b"abaa", &mut out);
        assert_eq!(out, vec![258, 256]);
    }

    #[test]
    fn missing_byte_tokens_are_dropped_and_cache_returns_same_ids() {
        let mut byte_ids = [None; 256];
        byte_ids[b'x' as usize] = Some(7);
        let bpe = Bpe::new(&[(7, 7, 9)], byte_ids, None);
        let mut out = Vec::new();
        bpe.encode_word("x€x".as_bytes(), &mut out);
        assert_eq!(out, vec![9]);
        let mut again = Vec::new();
        bpe.encode_word("x€x".as_bytes(), &mut again);
        assert_eq!(again, out);
    }
}
