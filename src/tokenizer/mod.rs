//! Byte-level BPE tokenizer (HF tokenizer.json or GGUF metadata) and chat templates.
