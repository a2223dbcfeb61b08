//! HF safetensors (+ config.json) reader.
