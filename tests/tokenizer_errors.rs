//! Bad input to the tokenizer gives typed errors, never panics; plus the small API contracts
//! (added-token matching, byte fallback in decode, BOS) on a hand-made tokenizer.json.

use pocketrt::tokenizer::{describe_tokens, StreamDecoder, Tokenizer};
use pocketrt::Error;
use serde_json::{json, Value};

/// A tiny byte-level BPE: all 256 byte tokens, merges "h e" → "he", "he llo"... and two
/// added tokens.
fn tiny() -> Value {
    let mut vocab = serde_json::Map::new();
    for b in 0..=255u8 {
        let c = pocketrt::tokenizer::bytelevel::byte_to_char(b);
        vocab.insert(c.to_string(), json!(b as u32));
    }
    for (i, t) in ["he", "ll", "llo", "hello", "Ġw"].iter().enumerate() {
        vocab.insert(t.to_string(), json!(256 + i));
    }
    json!({
        "version": "1.0",
        "added_tokens": [
            {"id": 261, "content": "<s>", "special": true, "normalized": false,
             "lstrip": false, "rstrip": false, "single_word": false},
            {"id": 262, "content": "<tool>", "special": false, "normalized": false,
             "lstrip": false, "rstrip": false, "single_word": false}
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [261], "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab,
                  "merges": ["h e", ["l", "l"], "ll o", "he llo", "Ġ w"]}
    })
}

fn load(v: &Value) -> pocketrt::Result<Tokenizer> {
    Tokenizer::from_hf_json(&v.to_string())
}

fn tokenizer_error(r: pocketrt::Result<Tokenizer>) -> String {
    match r {
        Err(Error::Tokenizer(m)) => m,
        Err(e) => panic!("expected Error::Tokenizer, got {e}"),
        Ok(_) => panic!("expected an error"),
    }
}

#[test]
fn tiny_tokenizer_merges_matches_added_tokens_and_adds_bos() {
    let t = load(&tiny()).unwrap();
    let ids = t.encode("hello<tool> w", true);
    assert_eq!(ids, vec![261, 259, 262, 260]);
    assert_eq!(t.decode(&ids, true).unwrap(), "hello<tool> w");
    assert_eq!(t.decode(&ids, false).unwrap(), "<s>hello<tool> w");
    assert_eq!(t.bos_id(), Some(261));
    let d = describe_tokens(&t, &[259, 9999]);
    assert_eq!(
        d,
        vec![
            (259, "hello".to_string()),
            (9999, "<invalid id>".to_string())
        ]
    );
    // NFC: "e" + combining acute is encoded as "é".
    assert_eq!(t.encode("e\u{301}", false), t.encode("é", false));
}

#[test]
fn malformed_tokenizer_json_is_a_tokenizer_error() {
    let m = tokenizer_error(Tokenizer::from_hf_json("{\"model\": "));
    assert!(m.contains("not valid JSON"), "{m}");
    let mut v = tiny();
    v["model"]["merges"] = json!(["h e x"]);
    assert!(tokenizer_error(load(&v)).contains("merge 0"));
    let mut v = tiny();
    v["model"]["merges"] = json!(["q z"]);
    assert!(tokenizer_error(load(&v)).contains("\"qz\""));
    let mut v = tiny();
    v["model"]["vocab"]["he"] = json!("five");
    assert!(tokenizer_error(load(&v)).contains("not a token id"));
    let mut v = tiny();
    v["model"]["vocab"]["he"] = json!(4_000_000_000u64);
    assert!(tokenizer_error(load(&v)).contains("far beyond"));
    let mut v = tiny();
    v["normalizer"] = json!({"type": "Lowercase"});
    assert!(tokenizer_error(load(&v)).contains("Lowercase"));
    let mut v = tiny();
    v["model"]["type"] = json!("WordPiece");
    assert!(tokenizer_error(load(&v)).contains("WordPiece"));
    let mut v = tiny();
    v["pre_tokenizer"] =
        json!({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"});
    assert!(tokenizer_error(load(&v)).contains("regex"));
    let mut v = tiny();
    v.as_object_mut().unwrap().remove("model");
    assert!(tokenizer_error(load(&v)).contains("model"));
}

/// Found by fuzzing (tokenizer_json): an added token with the id of another token loaded,
/// decoded that token's id as itself, and exported a tokenizer.json that did not load.
#[test]
fn added_token_taking_another_tokens_id_is_a_tokenizer_error() {
    let mut v = tiny();
    v["added_tokens"][1]["id"] = json!(256);
    let m = tokenizer_error(load(&v));
    assert!(m.contains("\"<tool>\" has id 256, the id of \"he\""), "{m}");
    let mut v = tiny();
    v["added_tokens"][1]["id"] = json!(261);
    assert!(tokenizer_error(load(&v)).contains("the id of \"<s>\""));
    // An added token that is also in the vocabulary under its own id is fine.
    let mut v = tiny();
    v["model"]["vocab"]["<s>"] = json!(261);
    assert_eq!(load(&v).unwrap().encode("<s>he", false), vec![261, 256]);
}

#[test]
fn unknown_token_id_in_decode_is_an_error_and_stream_state_survives() {
    let t = load(&tiny()).unwrap();
    let e = t.decode(&[1, 70000], false).unwrap_err();
    assert!(
        matches!(&e, Error::Tokenizer(m) if m.contains("70000")),
        "{e}"
    );
    assert!(t.token_to_piece(70000).is_none());
    let mut s = StreamDecoder::new(false);
    // "中" is e4 b8 ad: feed the bytes one at a time, with a bad id in between.
    assert_eq!(s.push(&t, 0xe4).unwrap(), "");
    assert!(s.push(&t, 99_999).is_err());
    assert_eq!(s.push(&t, 0xb8).unwrap(), "");
    assert_eq!(s.push(&t, 0xad).unwrap(), "中");
    // An invalid byte comes out as U+FFFD, like a whole decode.
    assert_eq!(s.push(&t, 0xff).unwrap(), "\u{FFFD}");
    assert_eq!(s.push(&t, 0xe4).unwrap(), "");
    assert_eq!(s.flush(), "\u{FFFD}");
}

#[test]
fn invalid_utf8_in_an_added_token_is_a_typed_error() {
    // A lone surrogate escape cannot be UTF-8.
    let text = tiny().to_string().replace("<tool>", "<\\udc80tool>");
    let m = tokenizer_error(Tokenizer::from_hf_json(&text));
    assert!(m.contains("JSON"), "{m}");
    // Raw bytes that are not UTF-8.
    let mut bytes = tiny().to_string().into_bytes();
    let at = bytes.windows(6).position(|w| w == b"<tool>").unwrap();
    bytes[at + 1] = 0xC3;
    bytes[at + 2] = 0x28;
    let m = tokenizer_error(Tokenizer::from_hf_json_bytes(&bytes));
    assert!(m.contains("UTF-8"), "{m}");
    // Empty added-token content.
    let mut v = tiny();
    v["added_tokens"][1]["content"] = json!("");
    assert!(tokenizer_error(load(&v)).contains("empty"));
}
