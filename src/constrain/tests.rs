//! The constraint on a byte-level tokenizer (256 byte tokens and two specials): which
//! tokens each state allows, end of sequence exactly when the grammar accepts, forced
//! tokens, and typed errors for grammars llguidance rejects or that nest too deeply.

use super::*;
use crate::tokenizer::byte_level_json;
use crate::tokenizer::Tokenizer;

fn tokenizer() -> Tokenizer {
    let mut t =
        Tokenizer::from_hf_json(&byte_level_json(&["<|endoftext|>", "<|im_end|>"])).unwrap();
    let eos = t.token_to_id("<|endoftext|>").unwrap();
    t.set_eos_ids(vec![eos]).unwrap();
    t
}

fn id(t: &Tokenizer, text: &str) -> u32 {
    let ids = t.encode(text, false);
    assert_eq!(ids.len(), 1, "{text:?} is one token");
    ids[0]
}

/// The allowed ids of the current state.
fn allowed_ids(c: &mut Constraint) -> Vec<u32> {
    let mask = c.mask().unwrap().to_vec();
    (0..mask.len() as u32 * 32)
        .filter(|&t| allowed(&mask, t))
        .collect()
}

#[test]
fn end_of_sequence_is_allowed_exactly_when_the_grammar_accepts() {
    let t = tokenizer();
    let eos = t.eos_ids()[0];
    let im_end = t.token_to_id("<|im_end|>").unwrap();
    let trie = t.token_trie(&[]).unwrap();
    let mut c = trie.constrain(&Grammar::Regex("ab+".into())).unwrap();
    assert_eq!(allowed_ids(&mut c), vec![id(&t, "a")]);
    assert_eq!(c.forced().unwrap(), Some(id(&t, "a")));
    c.commit(id(&t, "a")).unwrap();
    assert_eq!(
        allowed_ids(&mut c),
        vec![id(&t, "b")],
        "not accepting: no EOS"
    );
    c.commit(id(&t, "b")).unwrap();
    // "ab" is complete, "abb…" too: b or end of sequence; never the other special.
    assert_eq!(allowed_ids(&mut c), vec![id(&t, "b"), eos]);
    assert!(!allowed(c.mask().unwrap(), im_end));
    assert!(
        c.commit(id(&t, "a")).is_err(),
        "a token the mask refuses is an error"
    );
}

#[test]
fn json_mode_starts_with_a_brace_and_ends_after_the_object() {
    let t = tokenizer();
    let eos = t.eos_ids()[0];
    let mut c = t
        .token_trie(&[])
        .unwrap()
        .constrain(&Grammar::JsonObject)
        .unwrap();
    assert_eq!(allowed_ids(&mut c), vec![id(&t, "{")]);
    for ch in "{\"a\": 1}".chars() {
        c.commit(id(&t, &ch.to_string())).unwrap();
    }
    assert_eq!(
        allowed_ids(&mut c),
        vec![eos],
        "the object is closed: only EOS"
    );
}

#[test]
fn rejected_grammars_are_invalid_argument_errors() {
    let t = tokenizer();
    let trie = t.token_trie(&[]).unwrap();
    let bad = [
        Grammar::JsonSchema(serde_json::json!({"type": "objekt"})),
        Grammar::Lark("start: ( \"a\"".into()),
        Grammar::Regex("[a-".into()),
    ];
    for g in bad {
        match trie.constrain(&g) {
            Err(Error::InvalidArgument(m)) => assert!(!m.is_empty()),
            other => panic!("{g:?}: {other:?}"),
        }
    }
    let mut deep = serde_json::json!({"type": "integer"});
    for _ in 0..MAX_NESTING {
        deep = serde_json::json!({"type": "array", "items": deep});
    }
    let e = trie.constrain(&Grammar::JsonSchema(deep)).unwrap_err();
    assert!(e.to_string().contains("nests"), "{e}");
}

#[test]
fn the_trie_is_built_once_per_tokenizer_and_end_of_sequence_set() {
    let t = tokenizer();
    let a = t.token_trie(&[]).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &t.token_trie(&[]).unwrap()));
    let im_end = t.token_to_id("<|im_end|>").unwrap();
    let other = t.token_trie(&[im_end]).unwrap();
    assert_eq!(other.eos(), &[im_end]);
    assert!(!std::sync::Arc::ptr_eq(&a, &other));
    assert_eq!(a.vocab_size(), t.vocab_size());
}
