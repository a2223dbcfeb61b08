//! tokenizer.json loading; a tokenizer that loads encodes a little text (plain, and with
//! its own added tokens), decodes it back and exports itself, and the export loads again.

use pocketrt::tokenizer::Tokenizer;

pub fn run(data: &[u8]) {
    let Ok(tok) = Tokenizer::from_hf_json_bytes(data) else {
        return;
    };
    let mut text = String::from("Hello, world!  héllo\n\t 123 ");
    for t in tok.added_tokens().iter().take(4) {
        text.push_str(&t.content);
    }
    let ids = tok.encode(&text, true);
    let _ = tok.decode(&ids, false);
    for id in ids.iter().take(16) {
        let _ = tok.token_to_piece(*id);
    }
    Tokenizer::from_hf_json(&tok.to_hf_json()).expect("the export loads back");
}
