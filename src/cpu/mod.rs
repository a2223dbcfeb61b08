//! Plain-Rust forward pass: the oracle every GPU kernel is judged against.
