//! Constrained decoding: JSON mode, JSON Schema, Lark grammars and regular expressions
//! as a per-step mask of the tokens that keep the output valid, by `llguidance` (the
//! library llama.cpp, vLLM and SGLang use).
//!
//! [`TokenTrie`] is built once per tokenizer (the bytes of every token, specials marked
//! as llguidance wants, the end-of-sequence ids), from what a [`Vocabulary`] tells of
//! each token, and cached with the tokenizer (`Tokenizer::token_trie`, which implements
//! [`Vocabulary`]: this module does not know the tokenizer); a request compiles its [`Grammar`]
//! against it into a [`Constraint`], which errors before any token is generated when
//! llguidance rejects the grammar. Each step the sampler asks the constraint for its
//! bitmask ([`Constraint::mask`]: bit `t % 32` of word `t / 32` is set when token `t` is
//! allowed), selects among the allowed tokens only, and commits the choice
//! ([`Constraint::commit`]). End-of-sequence is allowed exactly when the grammar
//! accepts what was generated; once the grammar can take nothing more, only
//! end-of-sequence is.

use crate::error::{Error, Result};
use llguidance::api::{ParserLimits, TopLevelGrammar};
use llguidance::toktrie::{self, TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::Value as Json;
use std::sync::Arc;

#[cfg(test)]
mod tests;

/// What the output must match.
#[derive(Clone, Debug, PartialEq)]
pub enum Grammar {
    /// Any JSON object (`response_format: {"type": "json_object"}`).
    JsonObject,
    /// A value valid under this JSON Schema (`response_format: {"type": "json_schema"}`).
    JsonSchema(Json),
    /// llguidance's Lark dialect (pocketrt's `grammar: {"type": "lark"}`).
    Lark(String),
    /// A whole-output regular expression (`grammar: {"type": "regex"}`).
    Regex(String),
}

/// JSON is written as `json.dumps` writes it (`", "`, `": "`, no other whitespace), so
/// that a sampled model cannot pad it without end. A schema's own `x-guidance` wins.
fn json_options() -> Json {
    serde_json::json!({
        "whitespace_flexible": false,
        "item_separator": ", ",
        "key_separator": ": ",
    })
}

/// Deepest nesting a schema (JSON arrays and objects) or a Lark grammar (brackets) may
/// have: llguidance compiles them recursively, and a deeper one would overflow the stack
/// instead of failing.
pub const MAX_NESTING: usize = 128;

/// Nesting depth of a JSON value.
fn json_depth(v: &Json) -> usize {
    // Iterative: the value may be deeper than the stack allows recursion.
    let mut deepest = 0;
    let mut stack = vec![(v, 1)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Json::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Json::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// Deepest bracket nesting of a grammar's text (`(`, `[`, `{`).
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0);
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl Grammar {
    /// How deeply the grammar nests (see [`MAX_NESTING`]).
    pub fn nesting(&self) -> usize {
        match self {
            Grammar::JsonObject => 1,
            Grammar::JsonSchema(s) => json_depth(s),
            Grammar::Lark(g) | Grammar::Regex(g) => bracket_depth(g),
        }
    }

    fn top_level(&self) -> Result<TopLevelGrammar> {
        let depth = self.nesting();
        if depth > MAX_NESTING {
            return Err(Error::InvalidArgument(format!(
                "it nests {depth} levels deep, more than the {MAX_NESTING} allowed"
            )));
        }
        let schema = |mut schema: Json| {
            if let Json::Object(map) = &mut schema {
                map.entry("x-guidance").or_insert_with(json_options);
            }
            TopLevelGrammar::from_json_schema(schema)
        };
        Ok(match self {
            Grammar::JsonObject => schema(serde_json::json!({"type": "object"})),
            Grammar::JsonSchema(s) => schema(s.clone()),
            Grammar::Lark(g) => TopLevelGrammar::from_lark(g.clone()),
            Grammar::Regex(r) => TopLevelGrammar::from_regex(r),
        })
    }
}

/// The limits a grammar compiles and steps within (llguidance's, with less fuel than its
/// defaults for the first compile: a pathological schema fails fast instead of
/// hanging; the per-step limits stay, they bound one mask to a few milliseconds).
pub fn limits() -> ParserLimits {
    ParserLimits {
        initial_lexer_fuel: 500_000,
        max_grammar_size: 200_000,
        max_lexer_states: 100_000,
        verbose_errors: false,
        ..ParserLimits::default()
    }
}

/// The tokenizer as llguidance sees it: each token's bytes (specials behind llguidance's
/// marker byte, so that grammars never produce them as text), tokenised greedily over
/// the trie (which llguidance uses only for forced tokens, off for non-canonical
/// tokenizers).
struct Env {
    trie: TokTrie,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<toktrie::TokenId> {
        self.trie.greedy_tokenize(s)
    }

    fn tokenize_is_canonical(&self) -> bool {
        false
    }
}

/// What the trie reads of a tokenizer's vocabulary (the tokenizer implements it).
pub trait Vocabulary {
    /// Tokens in the vocabulary (ids `0..vocab_size()`).
    fn vocab_size(&self) -> usize;
    /// The ids that end generation by default.
    fn eos_ids(&self) -> &[u32];
    /// The bytes a token decodes to.
    fn token_bytes(&self, id: u32) -> Option<&[u8]>;
    /// Whether a token is special (a control token, never text).
    fn is_special(&self, id: u32) -> bool;
    /// A token's name in the vocabulary.
    fn id_to_token(&self, id: u32) -> Option<&str>;
}

/// The token trie and grammar factory of one tokenizer (built once, shared by requests).
pub struct TokenTrie {
    factory: ParserFactory,
    eos: Arc<[u32]>,
    vocab: usize,
}

impl std::fmt::Debug for TokenTrie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenTrie")
            .field("vocab", &self.vocab)
            .field("eos", &self.eos)
            .finish()
    }
}

impl TokenTrie {
    /// The trie of `tokenizer`'s vocabulary; `eos` are the ids that end generation (the
    /// tokenizer's when empty).
    pub fn new(tokenizer: &impl Vocabulary, eos: &[u32]) -> Result<TokenTrie> {
        let eos: Vec<u32> = match eos {
            [] => tokenizer.eos_ids().to_vec(),
            ids => ids.to_vec(),
        };
        let vocab = tokenizer.vocab_size();
        let words: Vec<Vec<u8>> = (0..vocab as u32)
            .map(|id| {
                let bytes = tokenizer.token_bytes(id).unwrap_or_default();
                if tokenizer.is_special(id) || eos.contains(&id) {
                    let name = tokenizer.id_to_token(id).unwrap_or_default().as_bytes();
                    [&[TokTrie::SPECIAL_TOKEN_MARKER][..], name].concat()
                } else {
                    bytes.to_vec()
                }
            })
            .collect();
        let primary = eos.first().copied().unwrap_or(0);
        let trie =
            TokTrie::from(&TokRxInfo::new(vocab as u32, primary), &words).with_eos_tokens(&eos);
        let env: TokEnv = Arc::new(Env { trie });
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| Error::InvalidArgument(format!("token trie: {e}")))?;
        factory.set_stderr_log_level(0).set_buffer_log_level(0);
        *factory.limits_mut() = limits();
        Ok(TokenTrie {
            factory,
            eos: eos.into(),
            vocab,
        })
    }

    /// The end-of-sequence ids.
    pub fn eos(&self) -> &[u32] {
        &self.eos
    }

    /// Tokens of the vocabulary the trie covers.
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// Compile `grammar` for a request (see [`Constraint::new`]).
    pub fn constrain(&self, grammar: &Grammar) -> Result<Constraint> {
        Constraint::new(self, grammar)
    }
}

/// One request's constraint: the grammar's matcher and the mask of its current state.
#[derive(Clone)]
pub struct Constraint {
    matcher: Matcher,
    eos: Arc<[u32]>,
    /// The mask of the current state (tokenizer vocabulary bits), once computed.
    mask: Option<Vec<u32>>,
    /// Masks computed and the microseconds each took, for benches.
    timings: Vec<u32>,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("eos", &self.eos)
            .field("masks", &self.timings.len())
            .finish()
    }
}

/// Bit `t` of a mask in words.
pub fn allowed(mask: &[u32], t: u32) -> bool {
    mask.get(t as usize / 32)
        .is_some_and(|w| w >> (t % 32) & 1 != 0)
}

impl Constraint {
    /// Compile `grammar` against `trie`. A grammar or schema llguidance rejects (bad
    /// syntax, unsupported keywords, past the [`limits`]) is
    /// [`Error::InvalidArgument`] with llguidance's message.
    pub fn new(trie: &TokenTrie, grammar: &Grammar) -> Result<Constraint> {
        let parser = trie
            .factory
            .create_parser(grammar.top_level()?)
            .map_err(|e| Error::InvalidArgument(first_line(&e.to_string())))?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(Error::InvalidArgument(first_line(&e)));
        }
        let mut c = Constraint {
            matcher,
            eos: trie.eos.clone(),
            mask: None,
            timings: Vec::new(),
        };
        // The first mask now: a grammar past the per-step limits fails here, before any
        // token is generated.
        c.mask()?;
        c.timings.clear();
        Ok(c)
    }

    /// The allowed tokens of this step as bits (`⌈vocab / 32⌉` words of the tokenizer's
    /// vocabulary; ids past it are never allowed), computed once per state. Every
    /// end-of-sequence id is allowed exactly when the grammar accepts the output so far.
    pub fn mask(&mut self) -> Result<&[u32]> {
        if self.mask.is_none() {
            let t0 = web_time::Instant::now();
            let mut vob = self.matcher.compute_mask_or_eos().map_err(grammar_error)?;
            let accepting =
                self.matcher.is_stopped() || self.matcher.is_accepting().map_err(grammar_error)?;
            for &e in self.eos.iter() {
                if (e as usize) < vob.len() {
                    vob.set(e as usize, accepting);
                }
            }
            self.timings.push(t0.elapsed().as_micros() as u32);
            self.mask = Some(vob.as_slice().to_vec());
        }
        Ok(self.mask.as_deref().expect("just computed"))
    }

    /// The one token the grammar allows now, if exactly one is (it can be fed without
    /// sampling).
    pub fn forced(&mut self) -> Result<Option<u32>> {
        let mask = self.mask()?;
        let mut found = None;
        for (i, &w) in mask.iter().enumerate() {
            if w == 0 {
                continue;
            }
            if found.is_some() || w.count_ones() > 1 {
                return Ok(None);
            }
            found = Some(i as u32 * 32 + w.trailing_zeros());
        }
        Ok(found)
    }

    /// The tokens the grammar forces from here on, in order (none where more than one
    /// continuation is allowed), without taking them: speculative decoding's drafts.
    pub fn forced_run(&mut self) -> Vec<u32> {
        self.matcher.compute_ff_tokens()
    }

    /// Take the chosen token (end-of-sequence included). A token the mask did not allow
    /// is an error.
    pub fn commit(&mut self, token: u32) -> Result<()> {
        if !allowed(self.mask()?, token) {
            return Err(Error::InvalidArgument(format!(
                "token {token} is not allowed by the grammar"
            )));
        }
        self.mask = None;
        if self.eos.contains(&token) {
            return Ok(());
        }
        self.matcher.consume_token(token).map_err(grammar_error)
    }

    /// Whether the output so far is complete under the grammar.
    pub fn accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }

    /// Microseconds each mask took so far, in order.
    pub fn mask_micros(&self) -> &[u32] {
        &self.timings
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_string()
}

fn grammar_error(e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("grammar: {}", first_line(&e.to_string())))
}
