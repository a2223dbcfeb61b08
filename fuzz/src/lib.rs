//! The fuzz targets' bodies, one module each with `run(data)`, and the helpers they share.
//! `fuzz_targets/NAME.rs` hands libFuzzer's inputs to `NAME::run` (`scripts/fuzz`); the
//! main crate's `tests/fuzz_corpus.rs` includes this file and replays every committed seed
//! (`corpus/NAME/`) through the same `run`, in the default test tier, without libFuzzer.

pub mod chat_template;
pub mod gguf_header;
pub mod gguf_stream;
pub mod openai_request;
pub mod package;
pub mod safetensors;
pub mod session_snapshot;
pub mod tokenizer_json;

/// A target's body: one input, checked; a finding panics.
pub type Target = fn(&[u8]);

/// Every target: its module's `run`, by the name of its `fuzz_targets/` file and corpus.
pub const TARGETS: [(&str, Target); 8] = [
    ("chat_template", chat_template::run),
    ("gguf_header", gguf_header::run),
    ("gguf_stream", gguf_stream::run),
    ("openai_request", openai_request::run),
    ("package", package::run),
    ("safetensors", safetensors::run),
    ("session_snapshot", session_snapshot::run),
    ("tokenizer_json", tokenizer_json::run),
];

/// Cuts `data` into consecutive chunks whose sizes cycle through sizes picked by `pick` (a
/// byte of the input), so a streaming parser sees its input split everywhere: single
/// bytes, odd sizes, large pieces.
pub fn chunks(data: &[u8], pick: u8) -> impl Iterator<Item = &[u8]> {
    const SIZES: [usize; 8] = [1, 2, 3, 7, 64, 255, 4093, 65_536];
    let mut i = pick as usize;
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = SIZES[i % SIZES.len()].min(rest.len());
        i = i.wrapping_mul(5).wrapping_add(1);
        let (now, later) = rest.split_at(n);
        rest = later;
        Some(now)
    })
}

/// Splits `data` at its first NUL: (before, after); all of it and nothing without one.
pub fn split_nul(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}
