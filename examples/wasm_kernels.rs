//! The fast CPU kernels' tests (tests/cpu_fast_kernels.rs, Q4 g64, and its submodule
//! tests/cpu_fast_kernels/q8.rs, Q8 g32) as an example target, so that they build for
//! wasm32 (an integration test there would also need the native CLI binary, which does not
//! build for wasm32). `scripts/test-wasm-kernels` runs them under node with simd128:
//! `cargo test --example wasm_kernels --target wasm32-unknown-unknown`. Natively `main`
//! does nothing (the same tests run as `cargo test --test cpu_fast_kernels`).

#[cfg(test)]
#[path = "../tests/cpu_fast_kernels.rs"]
mod cpu_fast_kernels;

fn main() {}
