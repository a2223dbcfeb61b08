//! Pre-tokenization: cutting text into the words BPE runs on.
//!
//! Supported HF pre-tokenizers: `Split` with a regex (behavior `Isolated`, not inverted),
//! `ByteLevel` (with `use_regex` = GPT-2's split, and `add_prefix_space` when it is the first
//! step), and a `Sequence` of those. The regexes run on `fancy-regex` (pure Rust: works on
//! wasm32; needed for the `\s+(?!\S)` look-ahead both Qwen2's and GPT-2's patterns use);
//! the Qwen2, Llama 3 and GPT-2 patterns run on equivalent hand-written matchers
//! ([`super::fastsplit`]), several times faster.

use super::fastsplit::{self, Kind};
use crate::error::{Error, Result};
use fancy_regex::Regex;
use std::borrow::Cow;

/// Qwen2's split regex, as in Qwen2/2.5/3's tokenizer.json (llama.cpp pre = "qwen2").
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's split regex (llama.cpp pre = "llama-bpe"): Qwen2's with digit runs of up to 3.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
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

/// One compiled split.
enum Splitter {
    Regex(Box<Regex>),
    Fast(Kind),
}

pub struct PreTokenizer {
    specs: Vec<StepSpec>,
    regexes: Vec<Splitter>,
    add_prefix_space: bool,
}

fn compile(pattern: &str, fast: bool) -> Result<Splitter> {
    let kind = match pattern {
        QWEN2_PATTERN => Some(Kind::Qwen2),
        LLAMA3_PATTERN => Some(Kind::Llama3),
        GPT2_PATTERN => Some(Kind::Gpt2),
        _ => None,
    };
    match kind {
        Some(k) if fast => Ok(Splitter::Fast(k)),
        _ => Regex::new(pattern)
            .map(|r| Splitter::Regex(Box::new(r)))
            .map_err(|e| Error::Tokenizer(format!("pre-tokenizer regex {pattern:?}: {e}"))),
    }
}

impl PreTokenizer {
    pub fn new(specs: Vec<StepSpec>) -> Result<PreTokenizer> {
        Self::build(specs, true)
    }

    /// Like [`PreTokenizer::new`] but every split runs on `fancy-regex`, even the patterns
    /// that have a hand-written matcher (tests compare the two).
    pub fn regex_only(specs: Vec<StepSpec>) -> Result<PreTokenizer> {
        Self::build(specs, false)
    }

    fn build(specs: Vec<StepSpec>, fast: bool) -> Result<PreTokenizer> {
        let mut regexes = Vec::new();
        let mut add_prefix_space = false;
        for (i, s) in specs.iter().enumerate() {
            match s {
                StepSpec::Split(p) => regexes.push(compile(p, fast)?),
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
                        regexes.push(compile(GPT2_PATTERN, fast)?);
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
        let re = match self.regexes.get(step) {
            None => return f(&text),
            Some(_) if text.is_empty() => return,
            Some(Splitter::Fast(kind)) => {
                return fastsplit::split(*kind, &text, &mut |w| {
                    self.split_from(step + 1, Cow::Borrowed(w), f)
                })
            }
            Some(Splitter::Regex(re)) => re,
        };
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
    fn hand_written_matchers_agree_with_fancy_regex_on_tricky_text() {
        let tricky = [
            "I'LL pay 123 now  \n\tok",
            "it's 'S 'ſ 're 'VE 'll 'x '",
            "  \n\n  \r\n \t x  ",
            "a\u{a0}\u{a0}b\u{3000}c  ",
            "12345 ١٢٣ １２ Ⅻ ½",
            "!!!\n\n?? ...x",
            " $%^ \r\r\n",
            "中文，测试。🦙🦙 é e\u{301} ",
            "\n",
            " ",
            "",
            "x",
            "   ",
            "\t\t",
            "a  ",
            "😀 😀  😀",
            "don't\nstop'n",
            "Ǆ ǅ ǆ 𝔘𝔫 𝟘𝟙",
            "\u{b}\u{c}\u{85}\u{2028}x\u{2029}",
        ];
        for pat in [QWEN2_PATTERN, LLAMA3_PATTERN, GPT2_PATTERN] {
            let spec = vec![StepSpec::Split(pat.into())];
            let fast = PreTokenizer::new(spec.clone()).unwrap();
            let slow = PreTokenizer::regex_only(spec).unwrap();
            for t in tricky {
                assert_eq!(words(&fast, t), words(&slow, t), "{pat} on {t:?}");
            }
        }
    }

    #[test]
    fn bad_regex_is_a_tokenizer_error() {
        let e = PreTokenizer::new(vec![StepSpec::Split("(".into())])
            .err()
            .unwrap();
        assert!(matches!(e, Error::Tokenizer(_)), "{e}");
    }
}
