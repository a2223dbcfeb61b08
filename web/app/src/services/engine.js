// The model, in a Worker (`createWorker`: the page never blocks while it loads or runs):
// loading with a progress a person can read, and what was loaded in plain words.
import { createWorker, hasWebGPU, threadSupport } from 'pocketrt';

export { hasWebGPU, threadSupport };

let worker = null;

/** The one Worker the app runs its model in (started on first use). */
export function getWorker() {
  worker ??= createWorker();
  return worker;
}

const MB = 1048576;
export const mb = (n) => (n / MB).toFixed(n < 10 * MB ? 1 : 0);
export const size = (n) => (n >= 1024 * MB ? `${(n / 1024 / MB).toFixed(1)} GB` : `${mb(n)} MB`);

function duration(s) {
  if (!Number.isFinite(s)) return '';
  if (s < 60) return `${Math.ceil(s)} s`;
  return `${Math.floor(s / 60)} min ${Math.ceil(s % 60)} s`;
}

/** A function turning the load's progress events into a sentence: the phase, bytes,
 * speed, time left, and whether the bytes come from the cache or the network. */
export function progressText() {
  let start = null;
  let startBytes = 0;
  const names = {
    manifest: 'Reading the model’s manifest',
    cache: 'Loading from cache',
    download: 'Downloading (network)',
    'cache-error': 'Downloading (network; not cached)',
    tokenizer: 'Reading the tokenizer',
    tuning: 'Tuning for this GPU (once)',
    ready: 'Starting the model',
  };
  return (ev) => {
    const now = performance.now();
    if (start === null && ev.loaded > 0) {
      start = now;
      startBytes = ev.loaded;
    }
    let text = names[ev.phase] ?? ev.phase;
    if (ev.total) text += ` · ${mb(ev.loaded)} / ${mb(ev.total)} MB`;
    const secs = start === null ? 0 : (now - start) / 1000;
    if (secs > 0.25 && ev.loaded > startBytes && ev.loaded < ev.total) {
      const rate = (ev.loaded - startBytes) / secs;
      text += ` · ${(rate / MB).toFixed(1)} MB/s · ${duration((ev.total - ev.loaded) / rate)} left`;
    }
    return text;
  };
}

/** The page's WebGPU adapter as the browser names it ("google swiftshader", "apple
 * metal-3"), or null: the package's own `info.adapter` may be a generic name. */
let adapterName = null;
navigator.gpu?.requestAdapter().then((a) => {
  const i = a?.info;
  if (i) adapterName = [i.vendor, i.architecture || i.device || i.description].filter(Boolean).join(' ') || null;
}, () => {});

/** The backend in plain words: "WebGPU · <device>" or "CPU · N threads". */
export function backendWords(info) {
  if (info.backend === 'cpu') return `CPU · ${info.threads} thread${info.threads === 1 ? '' : 's'}`;
  const generic = !info.adapter || /^(webgpu adapter|unknown)$/i.test(info.adapter);
  let device = generic ? adapterName ?? 'GPU' : info.adapter;
  if (info.profileDetail?.software || info.profile === 'swiftshader' || info.profile === 'lavapipe') {
    device = `${/swiftshader|lavapipe|llvmpipe/i.test(device) ? device : `${device}, ${info.profile}`} (software GPU)`;
  }
  return `WebGPU · ${device}`;
}

/** Where the model came from, in words. */
export function sourceWords(info) {
  if (info.source === 'cache') return 'from cache';
  if (info.source === 'network' && !info.shardsFromCache) return 'from the network';
  if (info.shardsFromCache === info.shards) return 'from cache (checked on the network)';
  return `${info.shardsFromCache} of ${info.shards} shards from cache, the rest from the network`;
}

/** The details panel's rows for a loaded model: [label, value]. */
export async function detailRows(model) {
  const i = model.info;
  const rows = [
    ['Backend', `${i.backend === 'cpu' ? 'CPU (wasm SIMD)' : 'WebGPU'} — ${i.backendReason}`],
    ['Threads', `${i.threads} — ${i.threadsReason}`],
    ['Adapter', i.adapter],
    ['Profile', i.profile ? `${i.profile} (${i.profileDetail?.forced ? 'forced' : 'detected'})` : 'none'],
    ['Weights', `${size(i.bytes)} in ${i.shards} shard${i.shards === 1 ? '' : 's'} (${i.shardsFromCache} from cache)`],
    ['Source', `${sourceWords(i)}; ${i.filesFromCache} small files cached, ${i.filesFetched} fetched`],
    ['Context', `${i.context} tokens`],
  ];
  if (i.profileDetail) {
    const d = i.profileDetail;
    rows.push(['Kernels', `GEMV ${d.gemv.qkv}, attention ${d.attention}, GEMM ${d.gemm}, prefill ${d.batched_prefill ? `batched (${d.prefill_chunk})` : 'token by token'}, subgroups ${d.subgroup_size ?? 'none'}, f16 ${d.shader_f16 ? 'yes' : 'no'}`]);
  }
  const gpu = await model.gpuBytes().catch(() => 0);
  rows.push(['GPU memory', gpu ? `${size(gpu)} of buffers` : 'none (CPU backend)']);
  const limits = await adapterLimits();
  if (limits && i.backend === 'webgpu') rows.push(['Limits', limits]);
  rows.push(['Memory plan', `weights ${size(i.bytes)} + KV cache for ${i.context} positions${i.uncached ? `; not cached: ${i.uncached}` : ''}`]);
  if (i.persisted !== null && i.persisted !== undefined) rows.push(['Storage', i.persisted ? 'persistent' : 'best effort (the browser may evict it)']);
  return rows;
}

/** The page's WebGPU adapter limits that bound a model (buffer sizes), or null. */
async function adapterLimits() {
  try {
    const adapter = await navigator.gpu?.requestAdapter();
    if (!adapter) return null;
    const l = adapter.limits;
    return `max buffer ${size(l.maxBufferSize)}, max storage binding ${size(l.maxStorageBufferBindingSize)}, workgroup ${l.maxComputeInvocationsPerWorkgroup} invocations`;
  } catch {
    return null;
  }
}
