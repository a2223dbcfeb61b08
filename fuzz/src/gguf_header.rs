//! The GGUF header + metadata reader, then what is built from a header alone: the model
//! config, the tokenizer (encoding a little text), and each tensor's range, read and
//! dequantized when it lies in the input.

use pocketrt::config::ModelConfig;
use pocketrt::format::gguf::Gguf;
use pocketrt::tokenizer::Tokenizer;

pub fn run(data: &[u8]) {
    let Ok(g) = Gguf::parse(data) else {
        return;
    };
    let _ = ModelConfig::from_gguf(&g, g.tensor("output.weight").is_some());
    if let Ok(tok) = Tokenizer::from_gguf(&g) {
        let ids = tok.encode("Hello, world! <|im_start|>  42", true);
        let _ = tok.decode(&ids, false);
    }
    let mut file = std::io::Cursor::new(data);
    for t in &g.tensors {
        let _ = Gguf::row_bytes(t);
        if let Ok(range) = g.tensor_range(t) {
            assert!(
                range.end <= data.len() as u64,
                "{} outside the file",
                t.name
            );
            // Small tensors only: the dequantized f32s are 4 bytes per element.
            if t.checked_elements().is_some_and(|n| n <= 1 << 20) {
                let _ = g.read_tensor_f32(&mut file, t);
            }
        }
    }
}
