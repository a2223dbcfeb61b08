//! Pre-tokenization: cutting text into the words BPE runs on.
//!
//! Supported HF pre-tokenizers: `Split` with a regex (behavior `Isolated`, not inverted),
//! `ByteLevel` (with `use_regex` = GPT-2's split, and `add_prefix_space` when it is the first
//! step), and a `Sequence` of those. The regexes run on `fancy-regex` (pure Rust: works on
//! wasm32; needed for the `\s+(?!\S)` look-ahead both Qwen2's and GPT-2's patterns use).

use crate::error::{Error, Result};
use fancy_regex::Regex;
use std::borrow::Cow;

/// Qwen2's split regex, as in Qwen2/2.5/3's tokenizer.json (llama.cpp pre = "qwen2").
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// GPT-2's split regex (HF ByteLevel `use_regex`, llama.cpp pre = "gpt-2").
pub const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// One pre-tokenizer step, as declared (kept for exporting tokenizer.json).
#[derive(Clone, Debug, PartialEq)]
pub enum StepSpec {
    /// HF `Split` { pattern: { Regex }, behavior: Isolated, invert: false }.
    Split(String),
    /// HF `ByteLevel`.
    ByteLevel {
        add_prefix_space: bool,
        use_regex: bool,
    },
}

pub struct PreTokenizer {
    specs: Vec<StepSpec>,
    regexes: Vec<Regex>,
    add_prefix_space: bool,
}

fn compile(pattern: &str) -> Result<Regex> {
    Regex::new(pattern)
        .map_err(|e| Error::Tokenizer(format!("pre-tokenizer regex {pattern:?}: {e}")))
}

impl PreTokenizer {
    pub fn new(specs: Vec<StepSpec>) -> Result<PreTokenizer> {
        let mut regexes = Vec::new();
        let mut add_prefix_space = false;
        for (i, s) in specs.iter().enumerate() {
            match s {
                StepSpec::Split(p) => regexes.push(compile(p)?),
                StepSpec::ByteLevel {
                    add_prefix_space: aps,
                    use_regex,
                } => {
                    if *aps {
                        if i != 0 {
                            return Err(Error::Tokenizer(
                                "ByteLevel with add_prefix_space is supported only as the first \
                                 pre-tokenizer"
                                    .into(),
                            ));
                        }
                        add_prefix_space = true;
                    }
                    if *use_regex {
                        regexes.push(compile(GPT2_PATTERN)?);
                    }
                }
            }
        }
        Ok(PreTokenizer {
            specs,
            regexes,
            add_prefix_space,
        })
    }

    pub fn specs(&self) -> &[StepSpec] {
        &self.specs
    }

    /// Whether a space is put before each text segment that does not start with one.
    pub fn prefix_space(&self, segment: &str) -> bool {
        self.add_prefix_space && !segment.starts_with(' ')
    }

    /// Cuts `text` into words, calling `f` on each in order. Every byte of `text` lands in
    /// exactly one word (gaps between matches are words too, as with HF's `Isolated`).
    pub fn split(&self, text: &str, f: &mut dyn FnMut(&str)) {
        self.split_from(0, Cow::Borrowed(text), f);
    }

    fn split_from(&self, step: usize, text: Cow<'_, str>, f: &mut dyn FnMut(&str)) {
        let Some(re) = self.regexes.get(step) else {
            f(&text);
            return;
        };
        if text.is_empty() {
            return;
        }
        let mut last = 0;
        for m in re.find_iter(&text) {
            match m {
                Ok(m) => {
                    if m.start() > last {
                        self.split_from(step + 1, Cow::Borrowed(&text[last..m.start()]), f);
                    }
                    if m.end() > m.start() {
                        self.split_from(step + 1, Cow::Borrowed(m.as_str()), f);
                    }
                    last = m.end();
                }
                // fancy-regex gives up past its backtrack limit (pathological input): the
                // rest of the text is kept as one word rather than lost.
                Err(_) => break,
            }
        }
        if last < text.len() {
            self.split_from(step + 1, Cow::Borrowed(&text[last..]), f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(p: &PreTokenizer, s: &str) -> Vec<String> {
        let mut v = Vec::new();
        p.split(s, &mut |w| v.push(w.to_string()));
        v
    }

    #[test]
    fn qwen2_split_isolates_digits_contractions_and_trailing_spaces() {
        let p = PreTokenizer::new(vec![StepSpec::Split(QWEN2_PATTERN.into())]).unwrap();
        assert_eq!(
            words(&p, "I'LL pay 123 now  \n\tok"),
            vec!["I", "'LL", " pay", " ", "1", "2", "3", " now", "  \n", "\tok"]
        );
    }

    #[test]
    fn gpt2_split_keeps_digit_runs_and_leaves_last_space_to_the_word() {
        let p = PreTokenizer::new(vec![StepSpec::ByteLevel {
            add_prefix_space: false,
            use_regex: true,
        }])
        .unwrap();
        assert_eq!(words(&p, "a  b 123"), vec!["a", " ", " b", " 123"]);
    }

    #[test]
    fn bad_regex_is_a_tokenizer_error() {
        let e = PreTokenizer::new(vec![StepSpec::Split("(".into())]).err().unwrap();
        assert!(matches!(e, Error::Tokenizer(_)), "{e}");
    }
}
