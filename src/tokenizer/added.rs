//! Added (and special) tokens: matched in the text before anything else, longest first.
//!
//! As in HF `tokenizers`: tokens with `normalized: false` are matched in the raw text, the
//! others in the normalized text; `lstrip`/`rstrip` make a match swallow the whitespace on
//! that side; `single_word` rejects a match glued to a word character.

/// One added token (HF `added_tokens[]`; in GGUF the control and user-defined tokens).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedToken {
    pub id: u32,
    pub content: String,
    /// Special (control) token: skipped by `decode(.., skip_special = true)`.
    pub special: bool,
    pub normalized: bool,
    pub lstrip: bool,
    pub rstrip: bool,
    pub single_word: bool,
}

/// A piece of input text after added-token matching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'a> {
    Text(&'a str),
    Token(u32),
}

/// Finds added tokens by their first byte (the sets are small: tens to hundreds of tokens).
#[derive(Default)]
struct Matcher {
    /// Per first byte, indices into the token list, longest content first.
    by_first: Vec<Vec<usize>>,
}

impl Matcher {
    fn new(tokens: &[AddedToken], pick: impl Fn(&AddedToken) -> bool) -> Matcher {
        let mut by_first = vec![Vec::new(); 256];
        for (i, t) in tokens.iter().enumerate() {
            if let Some(&b) = t.content.as_bytes().first() {
                if pick(t) {
                    by_first[b as usize].push(i);
                }
            }
        }
        for v in &mut by_first {
            v.sort_by_key(|&i| std::cmp::Reverse(tokens[i].content.len()));
        }
        Matcher { by_first }
    }

    fn is_empty(&self) -> bool {
        self.by_first.iter().all(Vec::is_empty)
    }

    /// Leftmost-longest, non-overlapping matches in `text`, pushed as segments.
    fn split<'a>(&self, tokens: &[AddedToken], text: &'a str, out: &mut Vec<Segment<'a>>) {
        if self.is_empty() {
            if !text.is_empty() {
                out.push(Segment::Text(text));
            }
            return;
        }
        let bytes = text.as_bytes();
        let mut last = 0; // end of the previous match
        let mut i = 0;
        while i < bytes.len() {
            let found = self.by_first[bytes[i] as usize]
                .iter()
                .map(|&k| &tokens[k])
                .find(|t| bytes[i..].starts_with(t.content.as_bytes()));
            let Some(t) = found else {
                i += 1;
                continue;
            };
            let end = i + t.content.len();
            if t.single_word && !is_single_word(text, i, end) {
                i = end;
                continue;
            }
            let mut start = i;
            if t.lstrip {
                start = last + text[last..i].trim_end().len();
            }
            let mut stop = end;
            if t.rstrip {
                stop = text.len() - text[end..].trim_start().len();
            }
            if start > last {
                out.push(Segment::Text(&text[last..start]));
            }
            out.push(Segment::Token(t.id));
            last = stop;
            i = stop;
        }
        if last < text.len() {
            out.push(Segment::Text(&text[last..]));
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_single_word(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back().is_some_and(is_word_char);
    let after = text[end..].chars().next().is_some_and(is_word_char);
    !before && !after
}

/// The added tokens of a tokenizer and their matchers.
#[derive(Default)]
pub struct AddedVocab {
    tokens: Vec<AddedToken>,
    raw: Matcher,
    normalized: Matcher,
}

impl AddedVocab {
    pub fn new(tokens: Vec<AddedToken>) -> AddedVocab {
        let raw = Matcher::new(&tokens, |t| !t.normalized);
        let normalized = Matcher::new(&tokens, |t| t.normalized);
        AddedVocab {
            tokens,
            raw,
            normalized,
        }
    }

    pub fn tokens(&self) -> &[AddedToken] {
        &self.tokens
    }

    /// Splits raw text on the tokens matched before normalization.
    pub fn split_raw<'a>(&self, text: &'a str, out: &mut Vec<Segment<'a>>) {
        self.raw.split(&self.tokens, text, out)
    }

    /// Splits normalized text on the tokens matched after normalization.
    pub fn split_normalized<'a>(&self, text: &'a str, out: &mut Vec<Segment<'a>>) {
        self.normalized.split(&self.tokens, text, out)
    }

    pub fn has_normalized(&self) -> bool {
        !self.normalized.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(id: u32, content: &str) -> AddedToken {
        AddedToken {
            id,
            content: content.into(),
            special: true,
            normalized: false,
            lstrip: false,
            rstrip: false,
            single_word: false,
        }
    }

    fn split(v: &AddedVocab, s: &str) -> Vec<Segment<'static>> {
        let s: &'static str = Box::leak(s.to_string().into_boxed_str());
        let mut out = Vec::new();
        v.split_raw(s, &mut out);
        out
    }

    #[test]
    fn longest_added_token_wins_at_the_leftmost_position() {
        let v = AddedVocab::new(vec![tok(1, "<|a|>"), tok(2, "<|a|><|a|>"), tok(3, "<|b")]);
        assert_eq!(
            split(&v, "x<|a|><|a|>y<|a|><|b|>"),
            vec![
                Segment::Text("x"),
                Segment::Token(2),
                Segment::Text("y"),
                Segment::Token(1),
                Segment::Token(3),
                Segment::Text("|>"),
            ]
        );
    }

    #[test]
    fn lstrip_rstrip_swallow_whitespace_and_single_word_rejects_glued_matches() {
        let mut t = tok(5, "<mask>");
        t.lstrip = true;
        t.rstrip = true;
        let mut w = tok(6, "cat");
        w.single_word = true;
        let v = AddedVocab::new(vec![t, w]);
        assert_eq!(
            split(&v, "a  <mask>  b"),
            vec![Segment::Text("a"), Segment::Token(5), Segment::Text("b")]
        );
        assert_eq!(
            split(&v, "cats cat"),
            vec![Segment::Text("cats "), Segment::Token(6)]
        );
    }
}
