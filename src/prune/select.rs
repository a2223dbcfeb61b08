//! Choosing the kept vocabulary: the most used tokens that fit in N, closed under BPE
//! dependencies (a kept merged token keeps its merge parents, recursively).

use crate::error::{Error, Result};
use crate::tokenizer::TokenOrigin;

/// The kept set and where its members came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Kept old ids, increasing: the new id of `kept[i]` is `i`.
    pub kept: Vec<u32>,
    /// Kept whatever the corpus: byte tokens, added/special tokens, the model's special
    /// ids, and their merge parents.
    pub required: usize,
    /// Other kept tokens the corpus uses.
    pub used: usize,
    /// Kept tokens the corpus never uses, kept because a used token needs them as (nested)
    /// merge parents.
    pub closure_only: usize,
    /// Kept tokens the corpus never uses, filling the rest of the budget in id order (BPE
    /// merge rank: the order the tokenizer's training found them frequent), with their
    /// parents.
    pub filler: usize,
    /// Tokens the corpus uses that did not fit in N with their parents.
    pub dropped_used: usize,
}

/// The parents a kept token needs.
fn parents(origin: TokenOrigin) -> Option<[u32; 2]> {
    match origin {
        TokenOrigin::Merged { left, right } => Some([left, right]),
        _ => None,
    }
}

struct Picker<'a> {
    origins: &'a [TokenOrigin],
    kept: Vec<bool>,
    count: usize,
}

impl Picker<'_> {
    /// `id` and its not yet kept (nested) parents.
    fn missing(&self, id: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![id];
        while let Some(t) = stack.pop() {
            if self.kept[t as usize] || out.contains(&t) {
                continue;
            }
            out.push(t);
            stack.extend(parents(self.origins[t as usize]).into_iter().flatten());
        }
        out
    }

    /// Keeps `ids`; returns how many were unused in the corpus.
    fn keep(&mut self, ids: &[u32], counts: &[u64]) -> usize {
        for &t in ids {
            self.kept[t as usize] = true;
        }
        self.count += ids.len();
        ids.iter().filter(|&&t| counts[t as usize] == 0).count()
    }
}

/// Picks at most `n` ids: first `required` (the model's special ids) with every byte and
/// added token, then the tokens `counts` says the corpus uses, most used first, then unused
/// tokens in id order for which `fills(id)` holds — each together with its parents, and
/// only when all of them fit.
pub fn select(
    origins: &[TokenOrigin],
    counts: &[u64],
    required: &[u32],
    n: usize,
    fills: &mut dyn FnMut(u32) -> bool,
) -> Result<Selection> {
    let v = origins.len();
    if counts.len() != v {
        return Err(Error::InvalidArgument(format!(
            "{} token counts for a vocabulary of {v}",
            counts.len()
        )));
    }
    if let Some(&bad) = required.iter().find(|&&id| id as usize >= v) {
        return Err(Error::InvalidArgument(format!(
            "the model's special token id {bad} is outside the tokenizer's {v} ids"
        )));
    }
    let mut p = Picker {
        origins,
        kept: vec![false; v],
        count: 0,
    };
    let base = (0..v as u32)
        .filter(|&id| matches!(origins[id as usize], TokenOrigin::Byte | TokenOrigin::Added));
    let (bytes, added) = (
        origins.iter().filter(|o| **o == TokenOrigin::Byte).count(),
        origins.iter().filter(|o| **o == TokenOrigin::Added).count(),
    );
    for id in base.chain(required.iter().copied()) {
        let m = p.missing(id);
        p.keep(&m, counts);
    }
    let mut sel = Selection {
        required: p.count,
        ..Selection::default()
    };
    if p.count > n {
        return Err(Error::InvalidArgument(format!(
            "--vocab-size {n} is smaller than the {} tokens every pruned vocabulary keeps \
             ({bytes} byte tokens, {added} added/special tokens, the model's special ids and \
             their merge parents)",
            p.count
        )));
    }
    let producible =
        |o: TokenOrigin| matches!(o, TokenOrigin::Merged { .. } | TokenOrigin::WholeWord);
    let mut used: Vec<u32> = (0..v as u32)
        .filter(|&id| counts[id as usize] > 0 && producible(origins[id as usize]))
        .collect();
    used.sort_by_key(|&id| (std::cmp::Reverse(counts[id as usize]), id));
    for id in used {
        let m = p.missing(id);
        if m.is_empty() {
            continue;
        }
        if p.count + m.len() > n {
            sel.dropped_used += 1;
            continue;
        }
        let unused = p.keep(&m, counts);
        sel.closure_only += unused;
        sel.used += m.len() - unused;
    }
    for id in 0..v as u32 {
        if p.count == n {
            break;
        }
        if p.kept[id as usize] || !producible(origins[id as usize]) || !fills(id) {
            continue;
        }
        let m = p.missing(id);
        if p.count + m.len() <= n {
            sel.filler += p.keep(&m, counts);
        }
    }
    sel.kept = (0..v as u32).filter(|&id| p.kept[id as usize]).collect();
    Ok(sel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenOrigin::*;

    /// 0..3 bytes a b c, 3 = ab (a b), 4 = abc (ab c), 5 = bc (b c), 6 special, 7 hole.
    fn origins() -> Vec<TokenOrigin> {
        let m = |left, right| Merged { left, right };
        vec![Byte, Byte, Byte, m(0, 1), m(3, 2), m(1, 2), Added, Hole]
    }

    #[test]
    fn used_tokens_bring_their_parents_and_filler_goes_in_id_order() {
        // "abc" used 5 times, nothing else: ab is kept only for closure.
        let counts = [0, 0, 0, 0, 5, 0, 0, 0];
        let s = select(&origins(), &counts, &[], 6, &mut |_| true).unwrap();
        assert_eq!(s.kept, vec![0, 1, 2, 3, 4, 6]);
        assert_eq!((s.required, s.used, s.closure_only, s.filler), (4, 1, 1, 0));
        let s = select(&origins(), &counts, &[], 7, &mut |_| true).unwrap();
        assert_eq!(s.kept, vec![0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(s.filler, 1);
        // A filler that may not be used (its text does not encode to it) is skipped.
        let s = select(&origins(), &counts, &[], 7, &mut |id| id != 5).unwrap();
        assert_eq!(s.kept.len(), 6);
    }

    #[test]
    fn a_used_token_whose_closure_does_not_fit_is_dropped_whole() {
        // abc needs ab too: with room for one more token only bc (used once) fits.
        let counts = [0, 0, 0, 0, 5, 1, 0, 0];
        let s = select(&origins(), &counts, &[], 5, &mut |_| true).unwrap();
        assert_eq!(s.kept, vec![0, 1, 2, 5, 6]);
        assert_eq!((s.used, s.dropped_used), (1, 1));
    }

    #[test]
    fn budget_below_the_required_closure_is_an_error() {
        let counts = [0; 8];
        // The model names abc (4) as a special id: it and ab (3) are required.
        let s = select(&origins(), &counts, &[4], 6, &mut |_| true).unwrap();
        assert_eq!(s.required, 6);
        let e = select(&origins(), &counts, &[4], 5, &mut |_| true).unwrap_err();
        assert!(
            e.to_string()
                .contains("--vocab-size 5 is smaller than the 6"),
            "{e}"
        );
        assert!(select(&origins(), &counts, &[9], 8, &mut |_| true).is_err());
    }
}
