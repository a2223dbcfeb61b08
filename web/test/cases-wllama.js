// Browser CPU benches, against wllama (npm @wllama/wllama: llama.cpp in wasm) and relaxed
// SIMD against simd128, run by run.js only when named (`scripts/test-web bench_wasm_cpu`),
// on the large fixture's Pocket-size model: wllama reads its GGUF (large.gguf),
// pocketrt the same weights as a package (/models/bench/: GGUF loads in the browser are
// WebGPU-only). Each prints one JSON line.
import assert from 'node:assert/strict';
import { benchModel, plainPage } from './cases.js';

const PACKAGE = '/models/bench/';
const PROMPT = 512;
const DECODE = 32;
/** A 512-token prompt of ordinary ids (no special tokens). */
const prompt = () => Array.from({ length: PROMPT }, (_, i) => 100 + ((i * 7919) % 20000));

/** In a Worker of the page (the pool's threads): a cold load of `url` (Cache Storage
 * emptied first), a cached one, then time to first token for the prompt and decode tok/s. */
function pocketrt(page, url, options) {
  return page.evaluate(
    async ({ url, options, prompt, n }) => {
      const { createWorker } = await import('/pkg/pocket.js');
      for (const k of await caches.keys()) await caches.delete(k);
      // Seconds from the start of a load to the first progress event of each phase
      // (manifest: the backend chosen; tokenizer: every shard in; ready: the model built).
      const timedLoad = async () => {
        const worker = createWorker('/pkg/worker.js');
        const phases = {};
        const t0 = performance.now();
        const onProgress = (e) => {
          phases[e.phase] ??= (performance.now() - t0) / 1000;
        };
        const m = await worker.load(url, { cache: true, contextLength: 1024, onProgress, ...options });
        return { worker, m, seconds: (performance.now() - t0) / 1000, phases };
      };
      const cold = await timedLoad();
      cold.worker.terminate();
      const { worker, m, seconds } = await timedLoad();
      try {
        let first = null;
        const tokens = [];
        const onToken = (p) => {
          first ??= performance.now();
          tokens.push(p.token);
        };
        const t0 = performance.now();
        for await (const _ of m.generate(prompt, { maxTokens: n, onToken })) {
          // the timing comes through onToken and stats
        }
        const s = await m.stats();
        return {
          backend: m.info.backend, reason: m.info.backendReason, threads: m.info.threads,
          cold_load_seconds: cold.seconds, cached_load_seconds: seconds,
          cold_load_phases: cold.phases, cold_load_reason: cold.m.info.backendReason,
          ttft_seconds: (first - t0) / 1000, prompt_tokens_per_second: s.promptTokens / s.promptSeconds,
          decode_tokens_per_second: s.tokensPerSecond, generated: s.generatedTokens, tokens,
        };
      } finally {
        worker.terminate();
      }
    },
    { url, options, prompt: prompt(), n: DECODE },
  );
}

export const tests = {
  // pocketrt on `auto` next to wllama 3.8.1 on 2 threads (CPU: no layer on WebGPU), same
  // weights, same page: cold and cached load, time to first token for 512 prompt tokens,
  // decode tok/s. The bar is ≥ 2× on prompt and decode, loads no slower; printed,
  // and only sanity-checked here (this machine's load varies with its other work).
  async bench_wasm_cpu_vs_wllama_on_auto_same_model({ page, server, scratch }) {
    assert.ok(server.models.large, 'POCKETRT_WEB_LARGE names the folder of large.gguf');
    benchModel(server, scratch);
    await plainPage(page, server);
    // The fixture's GGUF as written (gguf_write.rs types its empty merges as llama.cpp wants).
    const gguf = '/models/large/large.gguf';
    const ours = await pocketrt(page, PACKAGE, { backend: 'auto' });
    assert.ok(ours.backend, `pocketrt load failed: ${ours.code} ${ours.message}`);
    const theirs = await page.evaluate(
      async ({ url, prompt, n }) => {
        const { Wllama } = await import('/wllama/esm/index.js');
        const params = { n_threads: 2, n_ctx: 1024, n_batch: 512, n_gpu_layers: 0 };
        const timedLoad = async () => {
          const w = new Wllama({ default: '/wllama/esm/wasm/wllama.wasm' }, { logger: { debug() {}, log() {}, info() {}, warn: console.warn, error: console.error } });
          const t0 = performance.now();
          await w.loadModelFromUrl(new URL(url, location.href).href, params);
          return { w, seconds: (performance.now() - t0) / 1000 };
        };
        await new Wllama({ default: '/wllama/esm/wasm/wllama.wasm' }).cacheManager.clear();
        const cold = await timedLoad();
        await cold.w.exit();
        const { w, seconds } = await timedLoad();
        const t0 = performance.now();
        let first = null;
        let timings = null;
        await w.createCompletion({
          prompt, max_tokens: n, temperature: 0, ignore_eos: true, cache_prompt: false, stream: true,
          onData: (chunk) => {
            first ??= performance.now();
            timings = chunk.timings ?? timings;
          },
        });
        const threads = w.getNumThreads();
        await w.exit();
        return {
          threads, cold_load_seconds: cold.seconds, cached_load_seconds: seconds,
          ttft_seconds: (first - t0) / 1000, prompt_n: timings?.prompt_n, prompt_tokens_per_second: timings?.prompt_per_second,
          decode_tokens_per_second: timings?.predicted_per_second, generated: timings?.predicted_n,
        };
      },
      // wllama takes text: 512 letters (the GGUF has no merges, so about a token each; the
      // count it saw is reported as prompt_n).
      { url: gguf, prompt: Array.from({ length: PROMPT }, (_, i) => String.fromCharCode(97 + ((i * 7) % 26))).join(''), n: DECODE },
    );
    delete ours.tokens;
    const ratio = (k, inverse = false) => (inverse ? theirs[k] / ours[k] : ours[k] / theirs[k]);
    console.log(JSON.stringify({
      bench: 'browser_cpu_vs_wllama', prompt_tokens: PROMPT, pocketrt: ours, wllama: { version: '3.8.1', ...theirs },
      ttft_speedup: ratio('ttft_seconds', true), decode_speedup: ratio('decode_tokens_per_second'),
      cold_load_ratio: ratio('cold_load_seconds'), cached_load_ratio: ratio('cached_load_seconds'),
    }));
    assert.equal(ours.generated, DECODE, 'pocketrt: no early end of sequence skews the figure');
    assert.ok(theirs.decode_tokens_per_second > 0 && theirs.ttft_seconds > 0, 'wllama generated');
  },

  // The relaxed-SIMD build against the simd128 one (both threaded, the CPU backend, same
  // page): prompt and decode speed of each, and their greedy tokens, which must be equal
  // (the kernels' results are bit-identical).
  async bench_wasm_cpu_relaxed_simd_vs_simd128({ page, server, scratch }) {
    benchModel(server, scratch);
    await plainPage(page, server);
    const runs = {};
    for (const [name, wasm] of [['simd128', '/pkg/threads/pocketrt_bg.wasm'], ['relaxed', '/pkg/threads/relaxed/pocketrt_bg.wasm']]) {
      runs[name] = await pocketrt(page, PACKAGE, { backend: 'cpu', threadedWasmUrl: wasm });
      assert.ok(runs[name].backend, `${name}: load failed: ${runs[name].code} ${runs[name].message}`);
    }
    const tokens = { simd128: runs.simd128.tokens, relaxed: runs.relaxed.tokens };
    for (const r of Object.values(runs)) delete r.tokens;
    console.log(JSON.stringify({
      bench: 'browser_cpu_relaxed_simd', simd128: runs.simd128, relaxed: runs.relaxed,
      prompt_speedup: runs.relaxed.prompt_tokens_per_second / runs.simd128.prompt_tokens_per_second,
      decode_speedup: runs.relaxed.decode_tokens_per_second / runs.simd128.decode_tokens_per_second,
    }));
    assert.deepEqual(tokens.relaxed, tokens.simd128, 'the same greedy tokens');
  },
};
