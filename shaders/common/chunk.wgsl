// The per-chunk uniform of batched prefill (prefill.rs `ChunkUniform`), prepended to the
// prefill kernels: the chunk's first position in the sequence and its token count.

struct Chunk {
    start: u32,
    count: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> chunk: Chunk;
