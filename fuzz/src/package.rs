//! The package manifest and the streaming shard reader: input = manifest.json, a NUL, then
//! the shards' bytes back to back (cut at the manifest's shard sizes), each fed in chunks
//! of varied sizes. Every chunk emitted must lie inside its part.

use super::{chunks, split_nul};
use pocketrt::format::package::{Manifest, ShardReader};

pub fn run(data: &[u8]) {
    let (json, mut shards) = split_nul(data);
    let Ok(text) = std::str::from_utf8(json) else {
        return;
    };
    let Ok(m) = Manifest::from_json(text) else {
        return;
    };
    let _ = m.to_json();
    for index in 0..m.shards.len() {
        let mut reader = ShardReader::new(&m, index).expect("a validated manifest's shard");
        let n = (reader.len().min(shards.len() as u64)) as usize;
        let (shard, rest) = shards.split_at(n);
        shards = rest;
        let mut emit = |c: pocketrt::format::package::Chunk<'_>| {
            let part = &m.tensors[c.tensor].parts[c.part];
            assert!(
                c.offset + c.bytes.len() as u64 <= part.bytes,
                "chunk past its part"
            );
        };
        for c in chunks(shard, index as u8) {
            reader
                .feed(c, &mut emit)
                .expect("bytes within the declared size");
        }
        let _ = reader.finish();
    }
}
