// The browser tests of the threaded CPU backend (run by run.js): in a Worker of a
// cross-origin-isolated page the CPU backend runs the threaded build on a pool of Web
// Workers; elsewhere the single-threaded one; the tokens are the native CPU backend's
// either way.
import assert from 'node:assert/strict';
import { benchModel, expected, plainPage } from './cases.js';

const THREAD_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

/** In a fresh pocketrt Worker: load `url` with `options`, run `warmup` (token ids, 4 tokens)
 * if given, then greedy-generate `n` tokens of `prompt`; returns { info, tokens, stats }, or
 * { code, message } on error. */
function inWorker(page, url, options, prompt, n, warmup = null) {
  return page.evaluate(
    async ({ url, options, prompt, n, warmup }) => {
      const { createWorker } = await import('/pkg/pocket.js');
      const worker = createWorker('/pkg/worker.js');
      try {
        const m = await worker.load(url, options);
        if (warmup) {
          for await (const _ of m.generate(warmup, { maxTokens: 4 })) {
            // warm-up: the text is not needed
          }
        }
        const tokens = [];
        for await (const _ of m.generate(prompt, { maxTokens: n, onToken: (p) => tokens.push(p.token) })) {
          // the tokens come through onToken
        }
        return { info: m.info, tokens, stats: await m.stats() };
      } catch (e) {
        return { code: e.code, message: e.message };
      } finally {
        worker.terminate();
      }
    },
    { url, options, prompt, n, warmup },
  );
}

const cores = (page) => page.evaluate(() => navigator.hardwareConcurrency);

export const tests = {
  async thread_support_is_detected_and_the_main_thread_stays_single_threaded({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const t = await page.evaluate(async () => (await import('/pkg/pocket.js')).threadSupport());
    assert.equal(t.crossOriginIsolated, true, 'the server sends COOP/COEP');
    assert.equal(t.sharedMemory, true, 'Chromium has shared WebAssembly.Memory when isolated');
    assert.equal(t.worker, false);
    assert.equal(t.threads, 1, 'no threads on the main thread (it must not block)');
    assert.equal(t.workerThreads, Math.min(await cores(page), 8), 'a Worker gets the cores, at most 8');
    assert.match(t.reason, /threads in a Worker/);
    assert.deepEqual(t.headers, THREAD_HEADERS);
    // Asking for threads on the main thread falls back to one, saying why.
    const r = await page.evaluate(async (n) => {
      const m = await window.Pocket.load('/models/tiny/', { backend: 'cpu', cache: false, threads: 4 });
      const out = { info: m.info, tokens: await m.generateTokens(n.prompt, { maxTokens: n.n }) };
      m.unload();
      return out;
    }, { prompt: want.prompt, n: want.cpu_tokens.length });
    assert.equal(r.info.threads, 1);
    assert.match(r.info.threadsReason, /main thread/);
    assert.deepEqual(r.tokens, want.cpu_tokens, 'single-threaded tokens equal native');
  },

  async in_an_isolated_worker_the_cpu_backend_runs_on_threads_like_native({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const n = await cores(page);
    assert.ok(n >= 2, `the browser reports ${n} core(s); the test needs at least 2`);
    const opts = { backend: 'cpu', cache: false };
    const auto = await inWorker(page, '/models/tiny/', opts, want.prompt, want.cpu_tokens.length);
    assert.ok(auto.info, `load failed: ${auto.code} ${auto.message}`);
    assert.equal(auto.info.backend, 'cpu');
    assert.equal(auto.info.threads, Math.min(n, 8), `the pool has the cores: ${auto.info.threadsReason}`);
    assert.deepEqual(auto.tokens, want.cpu_tokens, `threaded tokens equal native (${want.cpu_engine})`);
    // An explicit count (more threads than cores still splits the same rows the same way).
    const three = await inWorker(page, '/models/tiny/', { ...opts, threads: 3 }, want.prompt, want.cpu_tokens.length);
    assert.ok(three.info, `load failed: ${three.code} ${three.message}`);
    assert.equal(three.info.threads, 3, three.info.threadsReason);
    assert.deepEqual(three.tokens, want.cpu_tokens, 'tokens on 3 threads equal native');
    const bad = await inWorker(page, '/models/tiny/', { ...opts, threads: 0 }, want.prompt, 1);
    assert.equal(bad.code, 'INVALID_ARGUMENT', `threads: 0 is refused: ${bad.message}`);
  },

  // `auto` with WebGPU present (SwiftShader here): the backend is decided first, on the
  // single-threaded build, and a CPU decision loads on the threaded one. On the tiny model
  // SwiftShader's one-layer step (a submit and an awaited read) is far slower than the
  // CPU's whole model, so the probe picks the CPU.
  async on_auto_in_an_isolated_worker_a_cpu_decision_runs_on_threads({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const n = await cores(page);
    assert.ok(n >= 2, `the browser reports ${n} core(s); the test needs at least 2`);
    const r = await inWorker(page, '/models/tiny/', { backend: 'auto', cache: false }, want.prompt, want.cpu_tokens.length);
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    console.log(`     auto: ${r.info.backend} on ${r.info.threads} threads: ${r.info.backendReason}`);
    assert.equal(r.info.backend, 'cpu', r.info.backendReason);
    assert.match(r.info.backendReason, /^software adapter .*; chosen by a probe of the model's layer shapes: CPU [\d.]+ tok\/s vs .*; probed in \d+ ms$/);
    assert.equal(r.info.profile, 'swiftshader', 'the probed GPU candidate, as on one thread');
    assert.equal(r.info.threads, Math.min(n, 8), `the pool has the cores: ${r.info.threadsReason}`);
    assert.deepEqual(r.tokens, want.cpu_tokens, `threaded tokens equal native (${want.cpu_engine})`);
    // Forced WebGPU in the same kind of Worker stays on the single-threaded build.
    const gpu = await inWorker(page, '/models/tiny/', { backend: 'webgpu', cache: false }, want.prompt, want.tokens.length);
    assert.ok(gpu.info, `load failed: ${gpu.code} ${gpu.message}`);
    assert.equal(gpu.info.threads, 1, gpu.info.threadsReason);
    assert.deepEqual(gpu.tokens, want.tokens, 'WebGPU tokens equal native');
  },

  // A package with Q8 g32 matrices (`convert --weights q8`), run as stored: `auto` on
  // this software adapter runs it on the CPU backend (threaded, in a Worker), faster than
  // the adapter's Q8 kernels, with native's tokens; `webgpu` runs it on the GPU's Q8
  // kernels with native's GPU tokens.
  async a_q8_package_runs_as_stored_on_the_cpu_and_on_webgpu_like_native({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const r = await inWorker(page, '/models/tiny/q8/', { backend: 'auto', cache: false }, want.prompt, want.q8_tokens.length);
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    assert.equal(r.info.backend, 'cpu', r.info.backendReason);
    assert.match(r.info.backendReason, /^\d+ matrices in Q8 g32, which the CPU backend runs as stored faster than the software adapter/);
    assert.deepEqual(r.tokens, want.q8_tokens, `Q8 tokens equal native (${want.q8_engine})`);
    assert.notDeepEqual(want.q8_tokens, want.cpu_tokens.slice(0, want.q8_tokens.length), 'the Q8 model is not the Q4 one');
    const n = want.q8_gpu_tokens.length;
    const gpu = await inWorker(page, '/models/tiny/q8/', { backend: 'webgpu', cache: false }, want.prompt, n);
    assert.ok(gpu.info, `webgpu load failed: ${gpu.code} ${gpu.message}`);
    assert.equal(gpu.info.backend, 'webgpu');
    assert.deepEqual(gpu.tokens, want.q8_gpu_tokens, `WebGPU Q8 tokens equal native (${want.q8_gpu_engine})`);
  },

  async without_isolation_the_worker_falls_back_to_one_thread_like_native({ page, server, fixture }) {
    const want = expected(fixture);
    server.state.isolated = false;
    try {
      await plainPage(page, server);
      const t = await page.evaluate(async () => (await import('/pkg/pocket.js')).threadSupport());
      assert.equal(t.crossOriginIsolated, false);
      assert.equal(t.workerThreads, 1);
      assert.match(t.reason, /not cross-origin isolated \(serve it with Cross-Origin-Opener-Policy: same-origin/);
      const opts = { backend: 'cpu', cache: false, threads: 4 };
      const r = await inWorker(page, '/models/tiny/', opts, want.prompt, want.cpu_tokens.length);
      assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
      assert.equal(r.info.threads, 1, 'one thread without shared memory');
      assert.match(r.info.threadsReason, /not cross-origin isolated/);
      assert.deepEqual(r.tokens, want.cpu_tokens, 'single-threaded tokens equal native');
    } finally {
      server.state.isolated = true;
    }
  },

  // A bench, not run by default (`scripts/test-web bench`): the Pocket-size package
  // (POCKETRT_WEB_BENCH_MODEL, default the large fixture) on the CPU backend in a Worker,
  // on one thread and on the default pool; prints both figures.
  async bench_cpu_backend_in_a_worker_on_one_thread_and_on_the_pool({ page, server, scratch }) {
    benchModel(server, scratch);
    await plainPage(page, server);
    const opts = { backend: 'cpu', cache: false, contextLength: 512 };
    const runs = {};
    for (const [name, threads] of [['single', 1], ['pool', undefined]]) {
      const r = await inWorker(page, '/models/bench/', { ...opts, threads }, [5, 6, 7, 8], 32, [1, 2, 3, 4]);
      assert.ok(r.info, `${name}: load failed: ${r.code} ${r.message}`);
      assert.equal(r.stats.generatedTokens, 32, `${name}: no early end of sequence skews the figure`);
      runs[name] = { threads: r.info.threads, tokens_per_second: r.stats.tokensPerSecond };
    }
    console.log(JSON.stringify({ bench: 'browser_cpu_threads', ...runs,
      speedup: runs.pool.tokens_per_second / runs.single.tokens_per_second }));
    assert.equal(runs.single.threads, 1);
    assert.ok(runs.pool.threads > 1, `the pool has ${runs.pool.threads} thread(s)`);
  },
};
