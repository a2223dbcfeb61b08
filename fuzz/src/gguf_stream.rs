//! The streaming GGUF → package converter as the browser drives it: the header from a
//! growing prefix, then the file fed in chunks of varied sizes. Every chunk it emits must
//! lie inside its part of the converted tensor table.

use super::chunks;
use pocketrt::format::gguf_stream::{header_from_prefix, GgufStream};

pub fn run(input: &[u8]) {
    let Some((&pick, data)) = input.split_first() else {
        return;
    };
    let len = Some(data.len() as u64);
    let mut prefix = 0;
    let mut header = None;
    for c in chunks(data, pick) {
        prefix += c.len();
        match header_from_prefix(&data[..prefix], len, "fuzz") {
            Ok(Some(g)) => {
                header = Some(g);
                break;
            }
            Ok(None) => continue,
            Err(_) => return,
        }
    }
    let Some(g) = header else {
        return;
    };
    let Ok(mut stream) = GgufStream::new(g, "fuzz") else {
        return;
    };
    let tensors = stream.tensors().to_vec();
    let mut emit = |c: pocketrt::format::package::Chunk<'_>| {
        let part = &tensors[c.tensor].parts[c.part];
        assert!(
            c.offset + c.bytes.len() as u64 <= part.bytes,
            "chunk past its part"
        );
    };
    for c in chunks(data, pick.wrapping_add(3)) {
        if stream.feed(c, &mut emit).is_err() {
            return;
        }
    }
    let _ = stream.finish();
}
