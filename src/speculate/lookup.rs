//! Prompt lookup: drafts copied from the request's own context.

/// The n-gram sizes tried, longest first: a match of several tokens predicts what follows
/// far better than one token, which recurs everywhere.
const NGRAM_MAX: usize = 4;
const NGRAM_MIN: usize = 2;

/// Up to `k` drafts for what follows `seq`: where its last n tokens (n from
/// [`NGRAM_MAX`] down to [`NGRAM_MIN`]) occurred earlier in `seq`, the tokens that
/// followed their most recent earlier occurrence. Empty when no such n-gram occurred.
/// A scan from the end (a few microseconds per thousand tokens of context, against a
/// decode step's milliseconds).
pub fn lookup(seq: &[u32], k: usize) -> Vec<u32> {
    let len = seq.len();
    if k == 0 {
        return vec![];
    }
    for n in (NGRAM_MIN..=NGRAM_MAX).rev() {
        if len <= n {
            continue;
        }
        let pattern = &seq[len - n..];
        let last = pattern[n - 1];
        // Earlier occurrences end before the last position: starts 0..len - n.
        let found = (0..len - n)
            .rev()
            .find(|&s| seq[s + n - 1] == last && seq[s..s + n] == *pattern);
        if let Some(s) = found {
            let from = s + n;
            return seq[from..(from + k).min(len)].to_vec();
        }
    }
    vec![]
}
