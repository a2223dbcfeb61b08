// Whether the CPU backend can run on several threads here, how many, and what enables it.
// The package ships two builds of the wasm module: pocketrt_bg.wasm (single-threaded) and
// threads/pocketrt_bg.wasm (std built with the `atomics` feature; rayon's pool runs on Web
// Workers sharing the module's WebAssembly.Memory). The threaded one needs
//  - a cross-origin-isolated page (served with THREAD_HEADERS), without which browsers
//    grant no shared memory (SharedArrayBuffer);
//  - a browser with shared WebAssembly.Memory;
//  - a Worker: the thread running the model blocks while the pool works, and blocking
//    waits (Atomics.wait) are not allowed on a page's main thread.
// Anywhere else the single-threaded build runs.

/** The headers that make a page cross-origin isolated (and so enable wasm threads). */
export const THREAD_HEADERS = Object.freeze({
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
});

/** Most threads used by default: decoding is bound by memory bandwidth, and more threads
 * than that rarely help (`threads` in the load options can ask for more). */
export const DEFAULT_MAX_THREADS = 8;
/** Most threads a load may ask for. */
export const MAX_THREADS = 64;

/** `new WebAssembly.Memory({shared: true})` works (feature test; WebKit lacks SharedArrayBuffer). */
export function sharedMemorySupported() {
  try {
    const m = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    return m.buffer !== undefined;
  } catch {
    return false;
  }
}

/** Whether this code runs in a Worker (not on a page's main thread). */
export function inWorker() {
  return typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope;
}

/** The default thread count where threads are possible: the cores, capped. */
export function defaultThreads() {
  const cores = globalThis.navigator?.hardwareConcurrency ?? 1;
  return Math.max(1, Math.min(cores, DEFAULT_MAX_THREADS));
}

const ONE = 'the CPU backend runs on one thread';
const MAIN_THREAD = `${ONE} on a page's main thread, which must not block: load in a Worker (createWorker) for threads`;

/** What keeps a Worker of this page from threads, or null. */
function blocker(isolated, sharedMemory) {
  if (!isolated) {
    const headers = Object.entries(THREAD_HEADERS).map(([k, v]) => `${k}: ${v}`).join(', ');
    return `the page is not cross-origin isolated (serve it with ${headers})`;
  }
  return sharedMemory ? null : 'this browser has no shared WebAssembly.Memory';
}

/**
 * `{ crossOriginIsolated, sharedMemory, worker, threads, workerThreads, headers, reason }`:
 * whether the page is isolated, whether shared wasm memory works, whether this code runs
 * in a Worker, the threads the CPU backend gets by default when a model loads here (1: the
 * single-threaded build) and in a Worker started by this page (`createWorker`), the
 * headers that isolate a page, and a sentence saying which and why.
 */
export function threadSupport() {
  const isolated = globalThis.crossOriginIsolated === true;
  const sharedMemory = sharedMemorySupported();
  const worker = inWorker();
  const block = blocker(isolated, sharedMemory);
  const workerThreads = block ? 1 : defaultThreads();
  const threads = worker ? workerThreads : 1;
  let reason;
  if (block) reason = `${ONE}: ${block}`;
  else if (workerThreads === 1) reason = `${ONE}: the browser reports one core`;
  else if (worker) reason = `the CPU backend runs on ${threads} threads (Web Workers sharing wasm memory)`;
  else reason = `the CPU backend runs on ${workerThreads} threads in a Worker (createWorker), on one on a page's main thread`;
  return { crossOriginIsolated: isolated, sharedMemory, worker, threads, workerThreads, headers: THREAD_HEADERS, reason };
}

/** Whether a load asking for `backend` runs on the CPU backend for sure. The threaded
 * build serves only those: WebGPU's awaited results never arrive in it (it stalls).
 * (`Pocket.load` decides an `auto` load with WebGPU first, and loads a CPU decision as
 * `backend: "cpu"`.) */
function cpuOnly(backend) {
  return backend === 'cpu' || ((backend ?? 'auto') === 'auto' && !globalThis.navigator?.gpu);
}

const GPU_LOAD = `${ONE}: the threaded build serves only loads on the CPU backend (backend "cpu", "auto" without WebGPU, or "auto" decided for the CPU)`;

/**
 * The threads a load gets here for its `threads` option (`requested`; default as
 * threadSupport) and `backend`: `{ threads, why }`, 1 meaning the single-threaded build.
 * More than one where threads are impossible falls back to 1, `why` saying why.
 */
export function plannedThreads(requested, backend = 'cpu') {
  const support = threadSupport();
  if (requested === undefined || requested === null) {
    if (support.threads > 1 && !cpuOnly(backend)) return { threads: 1, why: GPU_LOAD };
    return { threads: support.threads, why: support.reason };
  }
  const n = Number(requested);
  if (!Number.isInteger(n) || n < 1 || n > MAX_THREADS) {
    const e = new Error(`threads ${requested}: use an integer from 1 to ${MAX_THREADS}`);
    e.code = 'INVALID_ARGUMENT';
    throw e;
  }
  if (n === 1) return { threads: 1, why: `${ONE}: requested (threads: 1)` };
  const block = blocker(support.crossOriginIsolated, support.sharedMemory);
  if (block) return { threads: 1, why: `${ONE}: ${block}` };
  if (!support.worker) return { threads: 1, why: MAIN_THREAD };
  if (!cpuOnly(backend)) return { threads: 1, why: GPU_LOAD };
  return { threads: n, why: `the CPU backend runs on ${n} threads (requested)` };
}
