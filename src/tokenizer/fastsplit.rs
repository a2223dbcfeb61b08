//! Hand-written matchers for the split regexes of Qwen2, Llama 3 and GPT-2.
//!
//! They give exactly the words the regexes give (the tests compare them with `fancy-regex`
//! on the whole test corpus) at several times the speed: the `\s+(?!\S)` look-ahead forces
//! fancy-regex onto its backtracking VM. Character classes come from `regex-syntax`, so
//! `\p{L}`, `\p{N}` and `\s` mean here exactly what they mean in the regexes.

use std::sync::OnceLock;

const L: u8 = 1;
const N: u8 = 2;
const S: u8 = 4;

struct Classes {
    /// Flags of every BMP char.
    bmp: Vec<u8>,
    /// Sorted, non-overlapping (start, end inclusive, flags) for chars above the BMP.
    astral: Vec<(u32, u32, u8)>,
}

fn ranges(pattern: &str) -> Vec<(u32, u32)> {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::Parser::new().parse(pattern);
    match hir.as_ref().map(|h| h.kind()) {
        Ok(HirKind::Class(Class::Unicode(c))) => c
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        // The three patterns below are constants that regex-syntax always parses to a class.
        _ => Vec::new(),
    }
}

fn classes() -> &'static Classes {
    static C: OnceLock<Classes> = OnceLock::new();
    C.get_or_init(|| {
        let mut bmp = vec![0u8; 0x10000];
        let mut astral: Vec<(u32, u32, u8)> = Vec::new();
        for (pattern, flag) in [(r"\p{L}", L), (r"\p{N}", N), (r"\s", S)] {
            for (lo, hi) in ranges(pattern) {
                for c in lo..=hi.min(0xFFFF) {
                    bmp[c as usize] |= flag;
                }
                if hi > 0xFFFF {
                    astral.push((lo.max(0x10000), hi, flag));
                }
            }
        }
        // The three classes are disjoint, so the ranges never overlap.
        astral.sort_unstable();
        Classes { bmp, astral }
    })
}

fn class(c: char) -> u8 {
    let t = classes();
    let u = c as u32;
    if u < 0x10000 {
        return t.bmp[u as usize];
    }
    match t.astral.binary_search_by(|&(lo, hi, _)| {
        if hi < u {
            std::cmp::Ordering::Less
        } else if lo > u {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(i) => t.astral[i].2,
        Err(_) => 0,
    }
}

/// Which regex a matcher stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    Qwen2,
    /// As Qwen2 with `\p{N}{1,3}`.
    Llama3,
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2,
}

/// The text as chars with their byte offsets, plus the end offset.
struct Text<'a> {
    s: &'a str,
    chars: Vec<(usize, char)>,
}

impl Text<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).map(|&(_, c)| c)
    }
    fn off(&self, i: usize) -> usize {
        self.chars.get(i).map_or(self.s.len(), |&(o, _)| o)
    }
    fn is(&self, i: usize, flags: u8) -> bool {
        self.at(i).is_some_and(|c| class(c) & flags != 0)
    }
    /// End of the run of chars from `i` whose class matches `pred`.
    fn run(&self, mut i: usize, pred: impl Fn(char) -> bool) -> usize {
        while self.at(i).is_some_and(&pred) {
            i += 1;
        }
        i
    }
}

fn is_crlf(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// `'s|'t|'re|'ve|'m|'ll|'d`, optionally case-insensitive (then `s` also matches `ſ`).
fn contraction(t: &Text, i: usize, fold: bool) -> Option<usize> {
    if t.at(i) != Some('\'') {
        return None;
    }
    let norm = |c: Option<char>| {
        c.map(|c| {
            if !fold {
                c
            } else if c == 'ſ' {
                's'
            } else {
                c.to_ascii_lowercase()
            }
        })
    };
    match (norm(t.at(i + 1)), norm(t.at(i + 2))) {
        (Some('s' | 't' | 'm' | 'd'), _) => Some(i + 2),
        (Some('r' | 'v'), Some('e')) | (Some('l'), Some('l')) => Some(i + 3),
        _ => None,
    }
}

/// The whitespace alternatives shared by all three: `\s*[\r\n]+` (Qwen2/Llama3 only),
/// `\s+(?!\S)`, `\s+`.
fn whitespace(t: &Text, i: usize, crlf_alt: bool) -> Option<usize> {
    let end = t.run(i, |c| class(c) & S != 0);
    if end == i {
        return None;
    }
    if crlf_alt {
        // \s* backtracks to the last CR/LF in the run.
        if let Some(j) = (i..end).rev().find(|&j| t.at(j).is_some_and(is_crlf)) {
            return Some(j + 1);
        }
    }
    if end == t.chars.len() || end - i == 1 {
        Some(end)
    } else {
        Some(end - 1) // leave the last space to the next word
    }
}

fn match_qwen(t: &Text, i: usize, max_digits: usize) -> Option<usize> {
    let c = t.at(i)?;
    if let Some(e) = contraction(t, i, true) {
        return Some(e);
    }
    let cls = class(c);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if cls & (L | N) == 0 && !is_crlf(c) && t.is(i + 1, L) {
        return Some(t.run(i + 1, |c| class(c) & L != 0));
    }
    if cls & L != 0 {
        return Some(t.run(i, |c| class(c) & L != 0));
    }
    if cls & N != 0 {
        let end = t.run(i, |c| class(c) & N != 0);
        return Some(end.min(i + max_digits));
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    let other = |c: char| class(c) & (S | L | N) == 0;
    let start = if c == ' ' && t.at(i + 1).is_some_and(other) {
        Some(i + 1)
    } else if other(c) {
        Some(i)
    } else {
        None
    };
    if let Some(s) = start {
        let e = t.run(s, other);
        return Some(t.run(e, is_crlf));
    }
    whitespace(t, i, true)
}

fn match_gpt2(t: &Text, i: usize) -> Option<usize> {
    let c = t.at(i)?;
    if let Some(e) = contraction(t, i, false) {
        return Some(e);
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' in that order.
    let s = if c == ' ' { i + 1 } else { i };
    for flags in [L, N] {
        if t.is(s, flags) {
            return Some(t.run(s, |c| class(c) & flags != 0));
        }
    }
    let other = |c: char| class(c) & (S | L | N) == 0;
    if t.at(s).is_some_and(other) {
        return Some(t.run(s, other));
    }
    whitespace(t, i, false)
}

/// Cuts `s` into words as the regex of `kind` would (matches and the gaps between them).
pub fn split(kind: Kind, s: &str, f: &mut dyn FnMut(&str)) {
    let t = Text {
        s,
        chars: s.char_indices().collect(),
    };
    let n = t.chars.len();
    let mut i = 0;
    let mut gap = None; // start of an unmatched run (cannot happen with these patterns)
    while i < n {
        let m = match kind {
            Kind::Qwen2 => match_qwen(&t, i, 1),
            Kind::Llama3 => match_qwen(&t, i, 3),
            Kind::Gpt2 => match_gpt2(&t, i),
        };
        match m {
            Some(e) if e > i => {
                if let Some(g) = gap.take() {
                    f(&s[t.off(g)..t.off(i)]);
                }
                f(&s[t.off(i)..t.off(e)]);
                i = e;
            }
            _ => {
                gap.get_or_insert(i);
                i += 1;
            }
        }
    }
    if let Some(g) = gap {
        f(&s[t.off(g)..]);
    }
}
