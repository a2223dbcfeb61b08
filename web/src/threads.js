// Whether this page could run the CPU backend on several threads, and what enables it.
// Wasm threads need a shared WebAssembly.Memory, which browsers grant only to
// cross-origin-isolated pages (served with the two headers below). The current build is
// single-threaded (see `reason`): shared memory needs every object linked with the
// `atomics` feature, and stable Rust ships the wasm32 standard library without it —
// rust-lld refuses: "--shared-memory is disallowed by std-….o because it was not compiled
// with 'atomics' or 'bulk-memory' features". Rebuilding std needs nightly -Zbuild-std.

/** The headers that make a page cross-origin isolated (and so enable wasm threads). */
export const THREAD_HEADERS = Object.freeze({
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
});

/** `new WebAssembly.Memory({shared: true})` works (feature test; WebKit lacks SharedArrayBuffer). */
export function sharedMemorySupported() {
  try {
    const m = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    return m.buffer !== undefined;
  } catch {
    return false;
  }
}

/**
 * `{ crossOriginIsolated, sharedMemory, threads, headers, reason }`: whether the page is
 * isolated, whether shared wasm memory works, whether this build uses threads (never, yet),
 * the headers that isolate a page, and a sentence saying what stands in the way.
 */
export function threadSupport() {
  const isolated = globalThis.crossOriginIsolated === true;
  const sharedMemory = sharedMemorySupported();
  let reason = 'this build is single-threaded: wasm threads need a standard library built with ' +
    'the atomics target feature (nightly Rust -Zbuild-std), which the stable toolchain cannot do';
  if (!isolated) {
    reason += '; the page is also not cross-origin isolated (serve it with ' +
      Object.entries(THREAD_HEADERS).map(([k, v]) => `${k}: ${v}`).join(', ') + ')';
  } else if (!sharedMemory) {
    reason += '; this browser has no shared WebAssembly.Memory';
  }
  return { crossOriginIsolated: isolated, sharedMemory, threads: false, headers: THREAD_HEADERS, reason };
}
