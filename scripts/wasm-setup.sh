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
        # At opt-level 1: 15% less CPU to build (372 s of user time against 438 s on this
        # 2-core machine, 2026-12-03), and binding the package takes the same ~1.5 s.
        CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install wasm-bindgen-cli --version "$version"
    fi
}

# The relaxed-SIMD variants are this crate's feature `wasm-relaxed-simd` built into the same
# target dir as the plain builds (their dependencies, and the threaded builds' std, compiled
# once for both). A cdylib of a path package has no hash in its file name, so the two
# variants would overwrite one output and cargo would rebuild the crate at every switch;
# cargo's __CARGO_DEFAULT_LIB_METADATA (set by Rust's own bootstrap for std) gives it one,
# so both stay built, and each build puts its own in target/…/pocketrt.wasm. Without it
# (a cargo that drops the variable) the builds are still right, only slower.
export __CARGO_DEFAULT_LIB_METADATA=pocketrt-web
