//! Convert a GGUF file or HF folder into a pocket package.
