// The browser test cases (run by run.js). Each gets { page, context, server, fixture,
// scratch, results } and throws on failure.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export const CACHE = 'pocketrt-v1';

export function expected(fixture) {
  return JSON.parse(fs.readFileSync(path.join(fixture, 'expected.json'), 'utf8'));
}

function manifest(fixture) {
  return JSON.parse(fs.readFileSync(path.join(fixture, 'manifest.json'), 'utf8'));
}

/** Open the plain `<script type="module">` page; it must see WebGPU. */
export async function plainPage(page, server) {
  await page.goto(`${server.url}/test/`);
  await page.waitForFunction(() => document.getElementById('status').textContent !== 'loading');
  const status = await page.textContent('#status');
  assert.equal(status, 'ready', 'the module page imports the package and sees WebGPU');
}

/** Load `url` in the page (on WebGPU unless `options.backend` says otherwise); returns
 * { info, ms, shardMs, phases } (shardMs: from the manifest to the last shard; phases: the
 * progress phases seen, in order) or { code, message } on error. */
export function load(page, url, options = {}) {
  return page.evaluate(
    async ({ url, options }) => {
      const t0 = performance.now();
      const at = {};
      const onProgress = (e) => (at[e.phase] ??= performance.now());
      try {
        const m = await window.Pocket.load(url, { onProgress, backend: 'webgpu', ...options });
        window.model = m;
        const phases = Object.keys(at);
        return { info: m.info, ms: performance.now() - t0, shardMs: at.tokenizer - at.manifest, phases };
      } catch (e) {
        return { code: e.code, message: e.message };
      }
    },
    { url, options },
  );
}

/** Greedy tokens of the loaded `window.model` for the fixture's prompt. */
function generateTokens(page, want) {
  return page.evaluate(
    ({ prompt, n }) => window.model.generateTokens(prompt, { maxTokens: n }),
    { prompt: want.prompt, n: want.tokens.length },
  );
}

const shardRequests = (server) => server.requests.filter((r) => /weights-\d+\.bin$/.test(r));

/** A copy of the fixture whose manifest is changed by `edit`, served as models/NAME. */
function lyingCopy(server, fixture, scratch, name, edit) {
  const dir = path.join(scratch, name);
  fs.cpSync(fixture, dir, { recursive: true });
  const m = manifest(fixture);
  edit(m);
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m));
  server.models[name] = dir;
  return `/models/${name}/`;
}

/** Load the large model at `url` (≥ 150 MB): the peak growth of WebAssembly.Memory during
 * the load must stay under 32 MB. Prints the figures. */
export async function loadsInLittleMemory(page, server, url, what) {
  await plainPage(page, server);
  const r = await page.evaluate(async (url) => {
    const { wasmMemoryBytes } = await import('/pkg/pocket.js');
    const before = await wasmMemoryBytes();
    const t0 = performance.now();
    try {
      const m = await window.Pocket.load(url, { cache: false, contextLength: 256, backend: 'webgpu' });
      const after = await wasmMemoryBytes();
      const info = m.info;
      m.unload();
      return { before, after, info, ms: performance.now() - t0 };
    } catch (e) {
      return { code: e.code, message: e.message };
    }
  }, url);
  assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
  const mb = (n) => (n / 1048576).toFixed(1);
  const growth = r.after - r.before;
  console.log(
    `     ${mb(r.info.bytes)} MB ${what} (${r.info.shards} shards or pieces) loaded in ${(r.ms / 1000).toFixed(1)} s; ` +
      `WebAssembly.Memory ${mb(r.before)} → ${mb(r.after)} MB (growth ${mb(growth)} MB)`,
  );
  assert.ok(r.info.bytes >= 150e6, `the ${what} is at least 150 MB`);
  assert.ok(growth < 32 * 1048576, `peak wasm memory growth ${mb(growth)} MB < 32 MB`);
}

const BENCH_TOKENIZER = 'bench-tokenizer.json';

/** Serve the bench model as models/bench: POCKETRT_WEB_BENCH_MODEL, else the large
 * fixture. A package without a tokenizer of its own (`pocketrt synth` writes none), and the
 * large fixture (whose small tokenizer the memory test keeps), are served with the large
 * fixture's bench tokenizer (every id decodes). */
export function benchModel(server, scratch) {
  const source = server.models.bench ?? server.models.large;
  assert.ok(source, 'POCKETRT_WEB_BENCH_MODEL or POCKETRT_WEB_LARGE names a Pocket-size package');
  const m = manifest(source);
  if (server.models.bench && m.tokenizer) return;
  const large = server.models.large;
  assert.ok(large, 'the bench tokenizer comes from the large fixture (POCKETRT_WEB_LARGE)');
  assert.equal(m.config.vocab_size, manifest(large).config.vocab_size, 'the bench tokenizer covers the vocabulary');
  const dir = path.join(scratch, 'bench');
  fs.mkdirSync(dir);
  for (const f of fs.readdirSync(source)) {
    if (f !== 'manifest.json' && f !== BENCH_TOKENIZER) fs.symlinkSync(path.join(source, f), path.join(dir, f));
  }
  fs.symlinkSync(path.join(large, BENCH_TOKENIZER), path.join(dir, BENCH_TOKENIZER));
  m.tokenizer = BENCH_TOKENIZER;
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m));
  server.models.bench = dir;
}

export const tests = {
  async webgpu_adapter_is_available({ page, server }) {
    await plainPage(page, server);
    const adapter = await page.evaluate(async () => !!(await navigator.gpu.requestAdapter()));
    assert.ok(adapter, 'Chromium exposes a WebGPU adapter (SwiftShader)');
  },

  async greedy_tokens_equal_the_native_engine({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const r = await load(page, '/models/tiny/', { cache: false });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    const got = await page.evaluate(
      async ({ prompt, n }) => ({
        ids: window.model.encode(prompt),
        tokens: await window.model.generateTokens(prompt, { maxTokens: n }),
      }),
      { prompt: want.prompt, n: want.tokens.length },
    );
    assert.deepEqual(got.ids, want.prompt_ids, 'the wasm tokenizer encodes like the native one');
    assert.deepEqual(got.tokens, want.tokens, `greedy tokens equal native (${want.engine})`);
  },

  // Issue 23: the kernels of the `gpu` profile (the GPU GEMV and attention designs) forced
  // on SwiftShader, whose detected profile runs the lanes designs. Issue 41: greedy and
  // seeded sampled decode pipelined one step ahead.
  async forced_gpu_profile_on_swiftshader_gives_the_native_tokens({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const r = await load(page, '/models/tiny/', { cache: false, profile: 'gpu' });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    assert.equal(r.info.backend, 'webgpu');
    assert.equal(r.info.profile, 'gpu', 'info names the forced profile');
    const d = r.info.profileDetail;
    assert.equal(d?.name, 'gpu', `profileDetail is the profile's JSON: ${JSON.stringify(d)}`);
    assert.equal(d.forced, true, 'forced, not detected');
    assert.equal(d.software, true, 'the adapter is still SwiftShader');
    assert.equal(d.attention, 'group');
    assert.equal(d.gemv.qkv, 'gpu_rows');
    assert.equal(d.code_textures, null);
    const tokens = await generateTokens(page, want);
    assert.deepEqual(tokens, want.tokens, `greedy tokens under "gpu" equal native (${want.engine})`);
    // Pipelined: every token after the prompt's was read with the next step submitted.
    const stats = await page.evaluate(() => window.model.stats());
    assert.ok(stats.overlappedReads >= tokens.length - 1, `overlapped reads ${stats.overlappedReads} of ${tokens.length} tokens`);
    // Seeded sampling (top-k 40, each token drawn on the GPU) is pipelined too: every
    // sampled step's read overlapped, and the same tokens as the request drawn on the host
    // step by step (the test hook turns GPU draws off; no read overlapped) and as the
    // native engine in this profile. (Host and GPU draws can differ where f32 rounding
    // moves a draw across a boundary, and lavapipe's sums from SwiftShader's: with seeds
    // 1, 7 or 4242 one draw flips between the native engine and the browser, host and
    // GPU draws alike; the fixture's seed, 2, flips none.)
    assert.ok(want.sampled_tokens, 'the fixture has no sampled_tokens: rebuild it (examples/web_fixture.rs)');
    const sampled = await page.evaluate(
      async ({ prompt, opts }) => {
        const run = async (gpuDraws) => {
          window.model.gpuDrawsForTesting(gpuDraws);
          const before = window.model.stats().overlappedReads;
          const tokens = await window.model.generateTokens(prompt, opts);
          return { tokens, grew: window.model.stats().overlappedReads - before };
        };
        const runs = { gpu: await run(true), host: await run(false) };
        window.model.gpuDrawsForTesting(true);
        return runs;
      },
      { prompt: want.prompt, opts: want.sampled_options },
    );
    const { gpu, host } = sampled;
    assert.deepEqual(gpu.tokens, host.tokens, 'seeded tokens drawn on the GPU, pipelined, equal those drawn on the host');
    assert.deepEqual(gpu.tokens, want.sampled_tokens, 'seeded sampled tokens under "gpu" equal native');
    assert.ok(gpu.grew >= gpu.tokens.length, `overlapped reads grew by ${gpu.grew} over ${gpu.tokens.length} sampled tokens`);
    assert.equal(host.grew, 0, 'host draws await each step');
  },

  // The web build detects the profile as natively: SwiftShader is "swiftshader". A forced
  // profile on the same (cached) device is that profile, and the next default load is
  // detected again.
  async swiftshader_is_detected_and_a_forced_profile_does_not_stick({ page, server }) {
    await plainPage(page, server);
    const opts = { cache: false };
    const profileOf = (r) => {
      assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
      return [r.info.profile, r.info.profileDetail?.name, r.info.profileDetail?.forced];
    };
    const first = await load(page, '/models/tiny/', opts);
    assert.deepEqual(profileOf(first), ['swiftshader', 'swiftshader', false], first.info?.adapter);
    assert.equal(first.info.profileDetail.software, true);
    assert.equal(first.info.profileDetail.attention, 'lanes');
    const forced = await load(page, '/models/tiny/', { ...opts, profile: 'gpu' });
    assert.deepEqual(profileOf(forced), ['gpu', 'gpu', true]);
    const again = await load(page, '/models/tiny/', opts);
    assert.deepEqual(profileOf(again), ['swiftshader', 'swiftshader', false], 'the default is detected again');
    // No GPU candidate, no profile.
    const cpu = await load(page, '/models/tiny/', { ...opts, backend: 'cpu' });
    assert.ok(cpu.info, `load failed: ${cpu.code} ${cpu.message}`);
    assert.equal(cpu.info.profile, null);
    assert.equal(cpu.info.profileDetail, null);
  },

  async an_unknown_or_unrunnable_profile_is_refused_naming_why({ page, server }) {
    await plainPage(page, server);
    for (const backend of ['webgpu', 'cpu', 'auto']) {
      const r = await load(page, '/models/tiny/', { cache: false, backend, profile: 'nonsense' });
      assert.equal(r.code, 'INVALID_ARGUMENT', `${backend}: ${r.message}`);
      assert.match(r.message, /"nonsense"/, r.message);
      assert.match(r.message, /gpu, gpu-subgroups, lavapipe, swiftshader/, `the message names the profiles: ${r.message}`);
    }
    const r = await load(page, '/models/tiny/', { cache: false, profile: 42 });
    assert.equal(r.code, 'INVALID_ARGUMENT', r.message);
    // A profile the adapter cannot run: lavapipe's kernels need 8-wide subgroups, which
    // SwiftShader does not have.
    const lavapipe = await load(page, '/models/tiny/', { cache: false, profile: 'lavapipe' });
    assert.equal(lavapipe.code, 'INVALID_ARGUMENT', `lavapipe on SwiftShader: ${JSON.stringify(lavapipe.info ?? lavapipe.message)}`);
    assert.match(lavapipe.message, /needs subgroups of 8/, lavapipe.message);
  },

  // Issue 41: the on-device tuner on the `gpu` profile forced on SwiftShader, with
  // tune: "on" ("auto" tunes real GPUs only): the first load sweeps (its "tuning" phase)
  // within its budget and info names what it chose; the next load applies the design kept
  // in Cache Storage without a sweep; both decode the native tokens.
  async the_tuner_sweeps_once_and_the_next_load_applies_the_kept_design({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const opts = { profile: 'gpu', tune: 'on' };
    const first = await load(page, '/models/tiny/', opts);
    assert.ok(first.info, `load failed: ${first.code} ${first.message}`);
    const t = first.info.tuned;
    assert.ok(t?.sweep, `a sweep on the first load: ${JSON.stringify(t)}`);
    assert.ok(first.phases.includes('tuning'), `phases ${first.phases}`);
    const trials = t.sweep.trials;
    assert.equal(trials[0].stage, 'start', 'the profile as built is timed first');
    assert.ok(trials.every((x) => x.ms > 0), JSON.stringify(trials));
    // The 2 s budget is checked before each candidate (the profile's own always runs).
    const bound = Math.max(2, trials[0].seconds) + trials.at(-1).seconds + 0.5;
    assert.ok(t.sweep.seconds <= bound, `${t.sweep.seconds} s > ${bound} s`);
    console.log(`     tuned in ${t.sweep.seconds.toFixed(2)} s over ${trials.length} designs (${t.sweep.timer}): ${t.summary}`);
    assert.ok(first.info.backendReason.includes(t.summary), first.info.backendReason);
    assert.equal(first.info.profileDetail.split_len, t.design.split_len, 'info shows the tuned profile');
    assert.deepEqual(await generateTokens(page, want), want.tokens, 'the tuned design gives the native tokens');

    const second = await load(page, '/models/tiny/', opts);
    assert.ok(second.info, `load failed: ${second.code} ${second.message}`);
    assert.equal(second.info.tuned?.sweep, null, 'no sweep: the kept design');
    assert.ok(!second.phases.includes('tuning'), `phases ${second.phases}`);
    assert.deepEqual(second.info.tuned.design, t.design);
    assert.match(second.info.backendReason, /tuned design remembered/);
    assert.deepEqual(await generateTokens(page, want), want.tokens);

    const off = await load(page, '/models/tiny/', { ...opts, tune: false });
    assert.equal(off.info?.tuned, null, 'tune: false tunes nothing');
    const bad = await load(page, '/models/tiny/', { ...opts, tune: 'fast' });
    assert.equal(bad.code, 'INVALID_ARGUMENT', bad.message);
    assert.match(bad.message, /off, auto, on or force/);
  },

  async the_package_works_from_a_vite_build({ page, server, fixture }) {
    const want = expected(fixture);
    const { build } = await import('vite');
    await build({ configFile: path.join(here, 'vite-app/vite.config.js') });
    await page.goto(`${server.url}/vite/`);
    await page.waitForFunction(() => document.getElementById('status').textContent !== 'loading');
    assert.equal(await page.textContent('#status'), 'ready', 'the bundled package runs');
    const r = await load(page, '/models/tiny/', { cache: false });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    const tokens = await page.evaluate(
      ({ p, n }) => window.model.generateTokens(p, { maxTokens: n }),
      { p: want.prompt, n: want.tokens.length },
    );
    assert.deepEqual(tokens, want.tokens, 'the Vite build generates like native');
  },

  async abort_stops_generation_and_the_model_goes_on({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const r = await load(page, '/models/tiny/', { cache: false });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    const got = await page.evaluate(async ({ prompt, n }) => {
      const ctl = new AbortController();
      let seen = 0;
      let code = 'none';
      try {
        const opts = { maxTokens: 1000, signal: ctl.signal, onToken: () => ++seen === 3 && ctl.abort() };
        for await (const _ of window.model.generate(prompt, opts)) {
          // pieces are not needed
        }
      } catch (e) {
        code = e.code;
      }
      const stopped = window.model.stats();
      const tokens = await window.model.generateTokens(prompt, { maxTokens: n });
      return { code, seen, stopped, tokens, reused: window.model.stats().reusedTokens };
    }, { prompt: want.prompt, n: want.tokens.length });
    assert.equal(got.code, 'ABORTED');
    assert.equal(got.seen, 3, 'no token after the abort');
    assert.equal(got.stopped.generatedTokens, 3);
    assert.deepEqual(got.tokens, want.tokens, 'the next generation is right');
    assert.equal(got.reused, want.prompt_ids.length - 1, 'the prompt stayed in the KV cache');
  },

  async a_second_load_reads_every_shard_from_the_cache({ page, server, fixture }) {
    const shards = manifest(fixture).shards.length;
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    // Over a network (200 ms per shard request here) the cache saves the downloads.
    server.state.shardDelayMs = 200;
    const first = await load(page, '/models/tiny/', { parallel: 4 });
    assert.ok(first.info, `first load failed: ${first.code} ${first.message}`);
    assert.equal(shardRequests(server).length, shards, 'the first load fetches every shard');
    assert.equal(first.info.shardsFetched, shards);
    server.requests.length = 0;
    await page.evaluate(() => window.model.unload());
    const second = await load(page, '/models/tiny/', { parallel: 4 });
    assert.ok(second.info, `second load failed: ${second.code} ${second.message}`);
    assert.deepEqual(shardRequests(server), [], 'no shard request on the second load');
    assert.equal(second.info.shardsFromCache, shards);
    const ms = (r) => `${r.ms.toFixed(0)} ms (shards ${r.shardMs.toFixed(0)} ms)`;
    console.log(`     first load ${ms(first)}, cached load ${ms(second)}`);
    server.state.shardDelayMs = 0;
    assert.ok(second.shardMs < first.shardMs, 'the cached shards load faster');
    assert.ok(second.ms < first.ms, 'the cached load is faster');
  },

  async a_corrupt_cached_shard_is_detected_and_refetched({ page, server, fixture }) {
    const want = expected(fixture);
    const m = manifest(fixture);
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    const first = await load(page, '/models/tiny/');
    assert.ok(first.info, `load failed: ${first.code} ${first.message}`);
    await page.evaluate(() => window.model.unload());
    const shardUrl = `${server.url}/models/tiny/${m.shards[1].file}`;
    await page.evaluate(
      async ({ c, url }) => {
        const cache = await caches.open(c);
        const bytes = new Uint8Array(await (await cache.match(url)).arrayBuffer());
        bytes[1000] ^= 0xff;
        await cache.put(url, new Response(bytes));
      },
      { c: CACHE, url: shardUrl },
    );
    server.requests.length = 0;
    const second = await load(page, '/models/tiny/');
    assert.ok(second.info, `load failed: ${second.code} ${second.message}`);
    assert.deepEqual(shardRequests(server), [`/models/tiny/${m.shards[1].file}`]);
    assert.equal(second.info.shardsRefetched, 1);
    const tokens = await page.evaluate(
      ({ p, n }) => window.model.generateTokens(p, { maxTokens: n }),
      { p: want.prompt, n: want.tokens.length },
    );
    assert.deepEqual(tokens, want.tokens, 'the repaired model generates like native');
  },

  async an_aborted_load_resumes_with_only_the_missing_shards({ page, server, fixture }) {
    const shards = manifest(fixture).shards.length;
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    const aborted = await page.evaluate(async () => {
      const ctl = new AbortController();
      const onProgress = (ev) => {
        if (ev.phase === 'download' && ev.shard === 3) ctl.abort();
      };
      try {
        await window.Pocket.load('/models/tiny/', { parallel: 1, signal: ctl.signal, onProgress });
        return { code: 'none' };
      } catch (e) {
        return { code: e.code, message: e.message };
      }
    });
    assert.equal(aborted.code, 'ABORTED', `the load stops: ${aborted.message}`);
    server.requests.length = 0;
    const r = await load(page, '/models/tiny/', { parallel: 1 });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    assert.equal(r.info.shardsFromCache, 3, 'the shards loaded before the abort are cached');
    assert.equal(shardRequests(server).length, shards - 3, 'only the missing shards are fetched');
  },

  async bad_input_gives_clear_coded_errors({ page, server, fixture, scratch }) {
    await plainPage(page, server);
    const cases = [
      ['/models/tiny/nothing-here/', 'NETWORK', /HTTP 404/],
      ['/pkg/package.json', 'BAD_MANIFEST', /missing format/],
      ['/test/index.html', 'BAD_MANIFEST', /not JSON/],
    ];
    const hashLie = lyingCopy(server, fixture, scratch, 'hashlie', (m) => {
      m.shards[0].sha256 = '0'.repeat(64);
    });
    const sizeLie = lyingCopy(server, fixture, scratch, 'sizelie', (m) => {
      m.shards[m.shards.length - 1].bytes += 4;
    });
    cases.push([hashLie, 'SHARD_HASH', /sha256/]);
    cases.push([sizeLie, 'SHARD_SIZE', /bytes/]);
    for (const [url, code, message] of cases) {
      server.requests.length = 0;
      const r = await load(page, url, { cache: false });
      assert.equal(r.code, code, `${url}: ${r.message}`);
      assert.match(r.message, message, url);
      if (url === hashLie) {
        const first = server.requests.filter((p) => p.endsWith('/hashlie/weights-00000.bin'));
        assert.equal(first.length, 2, 'a shard failing its hash is fetched once more, then fails');
      }
    }
  },

  async without_webgpu_auto_runs_on_the_cpu_and_webgpu_is_a_clear_error({ context, page, server, fixture }) {
    const want = expected(fixture);
    await context.addInitScript(() => {
      Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });
    });
    await page.goto(`${server.url}/test/`);
    await page.waitForFunction(() => document.getElementById('status').textContent !== 'loading');
    assert.equal(await page.textContent('#status'), 'no-webgpu');
    const r = await load(page, '/models/tiny/');
    assert.equal(r.code, 'NO_WEBGPU', 'backend "webgpu" without WebGPU is a coded error');
    assert.match(r.message, /WebGPU is not available/);
    const auto = await load(page, '/models/tiny/', { backend: 'auto', cache: false });
    assert.ok(auto.info, `auto load failed: ${auto.code} ${auto.message}`);
    assert.equal(auto.info.backend, 'cpu');
    assert.match(auto.info.backendReason, /no WebGPU/);
    const tokens = await generateTokens(page, want);
    assert.deepEqual(tokens, want.cpu_tokens, `CPU tokens equal native (${want.cpu_engine})`);
  },

  async the_cpu_backend_generates_like_native_and_reloads_from_the_cache({ page, server, fixture }) {
    const want = expected(fixture);
    const shards = manifest(fixture).shards.length;
    await plainPage(page, server);
    await page.evaluate((name) => caches.delete(name), CACHE);
    for (const [round, fromCache] of [[1, 0], [2, shards]]) {
      server.requests.length = 0;
      const r = await load(page, '/models/tiny/', { backend: 'cpu' });
      assert.ok(r.info, `load ${round} failed: ${r.code} ${r.message}`);
      assert.equal(r.info.backend, 'cpu');
      assert.equal(r.info.adapter, 'none (CPU)');
      assert.equal(r.info.shardsFromCache, fromCache, `load ${round}: shards from the cache`);
      assert.equal(shardRequests(server).length, shards - fromCache, `load ${round}: fetches`);
      assert.deepEqual(await generateTokens(page, want), want.cpu_tokens, `load ${round}`);
    }
  },

  async auto_on_swiftshader_probes_before_loading_and_remembers_its_choice({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const r = await load(page, '/models/tiny/', { backend: 'auto' });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    console.log(`     auto chose ${r.info.backend} in ${r.ms.toFixed(0)} ms: ${r.info.backendReason}`);
    assert.match(
      r.info.backendReason,
      /^software adapter .*; chosen by a probe of the model's layer shapes: CPU [\d.]+ tok\/s vs software GPU adapter .* ([\d.]+ tok\/s \(predicted\)|at most [\d.]+ tok\/s \(its (GEMV|one-layer) probe\)); probed in \d+ ms$/,
    );
    assert.equal(r.info.profile, 'swiftshader', 'the GPU candidate\'s profile, whichever backend won');
    const tokens = await generateTokens(page, want);
    const native = r.info.backend === 'cpu' ? want.cpu_tokens : want.tokens;
    assert.deepEqual(tokens, native, `tokens equal native on the chosen ${r.info.backend}`);
    // The decision is kept in Cache Storage: the next load takes it without a probe.
    const again = await load(page, '/models/tiny/', { backend: 'auto' });
    assert.ok(again.info, `second load failed: ${again.code} ${again.message}`);
    console.log(`     again in ${again.ms.toFixed(0)} ms: ${again.info.backendReason}`);
    assert.match(again.info.backendReason, /; remembered from an earlier probe: CPU [\d.]+ tok\/s/);
    assert.equal(again.info.backend, r.info.backend);
  },

  async a_150_mb_package_loads_with_under_32_mb_of_wasm_memory_growth({ page, server }) {
    assert.ok(server.models.large, 'POCKETRT_WEB_LARGE names the large package');
    await loadsInLittleMemory(page, server, '/models/large/', 'package');
  },
};
