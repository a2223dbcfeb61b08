# Sourced by scripts/build-web and scripts/test-wasm-kernels (from the repository root):
# what a wasm32 build needs on a fresh machine, installed when missing.

# The wasm32 target of the active toolchain.
ensure_wasm_target() {
    if command -v rustup >/dev/null && ! rustup target list --installed | grep -q wasm32-unknown-unknown; then
        rustup target add wasm32-unknown-unknown
    fi
}

# wasm-bindgen-cli at Cargo.lock's wasm-bindgen version; $1: the tool to check
# (wasm-bindgen or wasm-bindgen-test-runner, both from that crate).
ensure_wasm_bindgen() {
    local version
    version=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
    if ! "$1" --version 2>/dev/null | grep -qF " $version"; then
        echo "installing wasm-bindgen-cli $version (a few minutes)" >&2
        cargo install wasm-bindgen-cli --version "$version"
    fi
}
