// Browser tests of faults (issue 28): cache management, offline start, storage quota and
// failed cache writes, a lost GPU device. Run by run.js; each gets { page, context, server,
// fixture, scratch, results }. Few, long cases: each load of the page costs seconds.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { CACHE, expected, load, plainPage } from './cases.js';

const manifest = (fixture) => JSON.parse(fs.readFileSync(path.join(fixture, 'manifest.json'), 'utf8'));
const shardRequests = (server) => server.requests.filter((r) => /weights-\d+\.bin$/.test(r));

/** The fixture's pocket package (no GGUF) as hub repository `id`. */
function hubPackage(server, fixture, scratch, id) {
  const dir = path.join(scratch, id.replace('/', '--'));
  fs.mkdirSync(dir, { recursive: true });
  const m = manifest(fixture);
  for (const f of ['manifest.json', m.tokenizer, ...m.shards.map((s) => s.file)]) {
    fs.copyFileSync(path.join(fixture, f), path.join(dir, f));
  }
  server.hub[id] = dir;
}

/** Greedy tokens of `window.model` for the fixture's prompt. */
const greedy = (page, want) =>
  page.evaluate(({ p, n }) => window.model.generateTokens(p, { maxTokens: n }), { p: want.prompt, n: want.tokens.length });

/** `Pocket.cache.METHOD(arg)` in the page, or in a Worker's (`worker: true`). */
function cacheCall(page, method, arg, worker = false) {
  return page.evaluate(
    async ({ method, arg, worker }) => {
      if (!worker) return window.Pocket.cache[method](arg);
      const { createWorker } = await import('/pkg/pocket.js');
      window.pw ??= createWorker('/pkg/worker.js');
      return window.pw.cache[method](arg);
    },
    { method, arg, worker },
  );
}

/** The URLs Cache Storage holds for pocketrt. */
const cachedKeys = (page) =>
  page.evaluate(async (c) => (await (await caches.open(c)).keys()).map((k) => k.url), CACHE);

/** `estimate()` answers a quota `room` bytes over the usage (`null`: the real one back).
 * (DevTools' Storage.overrideQuotaForOrigin does not change estimate() in Playwright's
 * off-the-record contexts.) */
const fakeQuota = (page, room) =>
  page.evaluate((room) => {
    window.realEstimate ??= StorageManager.prototype.estimate;
    const estimate = window.realEstimate;
    StorageManager.prototype.estimate =
      room === null
        ? estimate
        : async function () {
            const e = await estimate.call(this);
            return { usage: e.usage, quota: e.usage + room };
          };
  }, room);

/** Load `url` with the browser offline, twice (`offline: false`, then `true`): each from
 * the cache, `check(r, offline)`, unloaded; the server sees no request. Returns the URLs
 * the page requests from then on (the listener stays). */
async function loadsOffline({ page, context, server }, url, options, check) {
  const seen = [];
  page.on('request', (r) => seen.push(r.url()));
  await context.setOffline(true);
  server.requests.length = 0;
  for (const offline of [false, true]) {
    const r = await load(page, url, { ...options, offline });
    assert.ok(r.info, `offline load of ${url} (offline: ${offline}) failed: ${r.code} ${r.message}`);
    assert.equal(r.info.source, 'cache', `offline: ${offline}: ${JSON.stringify(r.info)}`);
    await check(r, offline);
    await page.evaluate(() => window.model.unload());
  }
  assert.deepEqual(server.requests, [], 'the server saw no request');
  return seen;
}

export const tests = {
  // Item 1: list / has / delete / clear / usage, in the page and through a Worker.
  async cache_list_has_delete_and_clear_do_what_they_say({ page, server, fixture }) {
    const m = manifest(fixture);
    const bytes = m.shards.reduce((n, s) => n + s.bytes, 0);
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    assert.deepEqual(await cacheCall(page, 'list'), [], 'an empty cache lists nothing');
    const r = await load(page, '/models/tiny/');
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    const url = `${server.url}/models/tiny/`;
    const list = await cacheCall(page, 'list');
    assert.equal(list.length, 1, JSON.stringify(list));
    const [entry] = list;
    assert.equal(entry.url, url);
    assert.deepEqual(
      [entry.bytes, entry.totalBytes, entry.shards, entry.shardsExpected, entry.complete],
      [bytes, bytes, m.shards.length, m.shards.length, true],
    );
    assert.ok(Math.abs(entry.lastUsed - Date.now()) < 120e3, `lastUsed is the load's time: ${entry.lastUsed}`);
    assert.deepEqual(await cacheCall(page, 'list', undefined, true), list, 'the Worker sees the same cache');
    assert.equal(await cacheCall(page, 'has', '/models/tiny/'), true, 'a relative URL resolves as in load');
    assert.equal(await cacheCall(page, 'has', '/models/other/'), false);
    const usage = await cacheCall(page, 'usage');
    assert.equal(usage.models, bytes);
    assert.ok(usage.quota > 0 && usage.usage >= bytes, JSON.stringify(usage));
    assert.deepEqual(await cacheCall(page, 'usage', undefined, true).then((u) => u.models), bytes);
    // One shard evicted (by the browser, say): listed as incomplete.
    await page.evaluate(
      async ({ c, u }) => (await caches.open(c)).delete(u),
      { c: CACHE, u: `${url}${m.shards[2].file}` },
    );
    const partial = (await cacheCall(page, 'list'))[0];
    assert.deepEqual([partial.shards, partial.complete], [m.shards.length - 1, false]);
    assert.equal(partial.bytes, bytes - m.shards[2].bytes);
    assert.equal(await cacheCall(page, 'has', url), false, 'has() wants the whole model');
    // Deleted through the Worker: the next load fetches every shard again.
    assert.equal(await cacheCall(page, 'delete', url, true), true);
    assert.equal(await cacheCall(page, 'delete', url), false, 'nothing left to delete');
    assert.deepEqual(await cacheCall(page, 'list'), []);
    const left = await page.evaluate(async (c) => (await (await caches.open(c)).keys()).map((k) => k.url), CACHE);
    assert.ok(!left.some((k) => k.includes('/models/tiny/')), `no file of the model is left: ${left}`);
    server.requests.length = 0;
    const again = await load(page, '/models/tiny/');
    assert.ok(again.info, `load failed: ${again.code} ${again.message}`);
    assert.equal(shardRequests(server).length, m.shards.length, 'after delete, the load fetches again');
    assert.equal(again.info.shardsFromCache, 0);
    // A GGUF file is listed by its pieces.
    const gguf = await load(page, '/models/tiny/tiny.gguf');
    assert.ok(gguf.info, `GGUF load failed: ${gguf.code} ${gguf.message}`);
    const ggufEntry = (await cacheCall(page, 'list')).find((e) => e.url.endsWith('tiny.gguf'));
    const ggufBytes = fs.statSync(path.join(fixture, 'tiny.gguf')).size;
    assert.deepEqual(
      [ggufEntry?.bytes, ggufEntry?.shards, ggufEntry?.shardsExpected, ggufEntry?.complete],
      [ggufBytes, gguf.info.shards, gguf.info.shards, true],
      JSON.stringify(ggufEntry),
    );
    assert.equal(await cacheCall(page, 'clear'), true);
    assert.deepEqual(await cacheCall(page, 'list'), []);
    assert.equal(await page.evaluate((c) => caches.has(c), CACHE), false, 'clear() removes the cache');
  },

  // Item 2: a hub id whose files are all cached starts with the browser offline, making
  // no request; offline: true never asks the network.
  async a_cached_model_loads_and_generates_offline_with_no_requests({ page, context, server, fixture, scratch }) {
    const want = expected(fixture);
    const shards = manifest(fixture).shards.length;
    const id = 'test-org/faults-offline';
    hubPackage(server, fixture, scratch, id);
    const hubEndpoint = `${server.url}/hub`;
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    const online = await load(page, id, { hubEndpoint });
    assert.ok(online.info, `load failed: ${online.code} ${online.message}`);
    assert.equal(online.info.source, 'network');
    assert.equal(online.info.filesFetched, 3, 'the listing, manifest and tokenizer');
    await page.evaluate(() => window.model.unload());
    const seen = await loadsOffline({ page, context, server }, id, { hubEndpoint }, async (r, offline) => {
      assert.deepEqual([r.info.filesFromCache, r.info.filesFetched], [3, 0]);
      assert.deepEqual([r.info.shardsFromCache, r.info.shardsFetched], [shards, 0]);
      assert.equal(r.info.offline, offline);
      assert.deepEqual(await greedy(page, want), want.tokens, 'the cached model generates like native');
    });
    // offline: true makes no request even online: an uncached model is NOT_CACHED.
    await context.setOffline(false);
    const missing = await load(page, 'test-org/never-loaded', { hubEndpoint, offline: true });
    assert.equal(missing.code, 'NOT_CACHED', missing.message);
    assert.match(missing.message, /never-loaded.*not in the cache, and offline: true forbids requests/);
    assert.deepEqual(server.requests, [], 'still no request');
    const hubSeen = seen.filter((u) => u.includes('/hub/') || u.includes('/models/'));
    assert.deepEqual(hubSeen, [], 'the page made no request for the model');
    // Offline by default, an uncached model is the network's error.
    await context.setOffline(true);
    const down = await load(page, '/models/tiny/manifest.json?uncached', {});
    assert.equal(down.code, 'NETWORK', down.message);
    await context.setOffline(false);
  },

  // Item 3: the storage estimate is checked before downloading; a cache.put that fails mid-load is reported and the load completes;
  // persist: true reports navigator.storage.persist()'s answer.
  async quota_put_failures_and_persist_are_reported({ page, server, fixture }) {
    const want = expected(fixture);
    const m = manifest(fixture);
    const bytes = m.shards.reduce((n, s) => n + s.bytes, 0);
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    // A quota 4 KiB over the usage. (DevTools' Storage.overrideQuotaForOrigin does not
    // change estimate() in Playwright's off-the-record contexts, so estimate is wrapped.)
    await page.evaluate(() => {
      const estimate = StorageManager.prototype.estimate;
      window.realEstimate = estimate;
      StorageManager.prototype.estimate = async function () {
        const e = await estimate.call(this);
        return { usage: e.usage, quota: e.usage + 4096 };
      };
    });
    server.requests.length = 0;
    const over = await load(page, '/models/tiny/');
    assert.equal(over.code, 'QUOTA', over.message);
    const [, needed, available] = /needs (\d+) more bytes .* allows (\d+) more/.exec(over.message) ?? [];
    assert.equal(Number(needed), bytes, `the message names the bytes needed: ${over.message}`);
    assert.ok(Number(available) <= 4096, `and the bytes available: ${over.message}`);
    assert.deepEqual(shardRequests(server), [], 'it fails before downloading');
    assert.deepEqual(await cachedKeys(page), [], 'and stores nothing, not even the manifest');
    const uncached = await load(page, '/models/tiny/', { overQuota: 'uncached' });
    assert.ok(uncached.info, `load failed: ${uncached.code} ${uncached.message}`);
    assert.match(uncached.info.uncached, /loaded without caching/);
    assert.deepEqual(await greedy(page, want), want.tokens);
    const held = await page.evaluate(async (c) => (await (await caches.open(c)).keys()).map((k) => k.url), CACHE);
    assert.deepEqual(held.filter((u) => /weights-/.test(u)), [], 'no shard was stored');
    await page.evaluate(() => (StorageManager.prototype.estimate = window.realEstimate));
    // The third shard's put fails (as a full disk would).
    const failing = `${server.url}/models/tiny/${m.shards[2].file}`;
    await page.evaluate((failing) => {
      const put = Cache.prototype.put;
      Cache.prototype.put = function (req, res) {
        const url = typeof req === 'string' ? req : req.url;
        if (url === failing) return Promise.reject(new DOMException('quota exceeded (test)', 'QuotaExceededError'));
        return put.call(this, req, res);
      };
    }, failing);
    const r = await page.evaluate(async () => {
      const events = [];
      const m = await window.Pocket.load('/models/tiny/', {
        backend: 'webgpu',
        persist: true,
        onProgress: (e) => e.phase === 'cache-error' && events.push(e),
      });
      window.model = m;
      return { info: m.info, events, persisted: await navigator.storage.persisted() };
    });
    assert.equal(r.events.length, 1, JSON.stringify(r.events));
    assert.equal(r.events[0].shard, 2);
    assert.match(r.events[0].message, /weights-00002\.bin: not cached: QuotaExceededError: quota exceeded \(test\)/);
    assert.deepEqual(r.info.cacheErrors, [r.events[0].message], 'info reports the failed put');
    assert.equal(r.info.shardsFetched, m.shards.length, 'the load completed');
    assert.deepEqual(await greedy(page, want), want.tokens);
    assert.equal(typeof r.info.persisted, 'boolean', `persist: true reports the answer: ${r.info.persisted}`);
    assert.equal(r.info.persisted, r.persisted, 'the answer is the browser\'s');
    // Only the shard that was not stored is fetched next time.
    server.requests.length = 0;
    const again = await load(page, '/models/tiny/');
    assert.ok(again.info, `load failed: ${again.code} ${again.message}`);
    assert.deepEqual(shardRequests(server), [`/models/tiny/${m.shards[2].file}`]);
  },
};

// Item 4: device.destroy() from the page (the device is caught by wrapping
// GPUAdapter.prototype.requestDevice before the page loads) during generation.
Object.assign(tests, {
  async a_destroyed_device_is_gpu_lost_at_once_and_reload_continues_the_chat({ context, page, server, fixture }) {
    const want = expected(fixture);
    await context.addInitScript(() => {
      const request = GPUAdapter.prototype.requestDevice;
      window.gpuDevices = [];
      GPUAdapter.prototype.requestDevice = async function (...args) {
        const device = await request.apply(this, args);
        window.gpuDevices.push(device);
        return device;
      };
    });
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    const r = await page.evaluate(async ({ prompt, n }) => {
      const lost = [];
      const m = await window.Pocket.load('/models/tiny/', {
        backend: 'webgpu',
        onDeviceLost: (e) => lost.push({ reason: e.reason, at: performance.now() }),
      });
      const ids = m.encode(prompt);
      const got = [];
      let destroyedAt = 0;
      const failure = async (run) => {
        try {
          await run();
          return { code: 'none' };
        } catch (e) {
          return { code: e.code, message: e.message, at: performance.now() };
        }
      };
      const onToken = (p) => {
        got.push(p.token);
        if (got.length === 3) {
          destroyedAt = performance.now();
          window.gpuDevices.at(-1).destroy();
        }
      };
      const inFlight = await failure(async () => {
        for await (const _ of m.generate(ids, { maxTokens: n, onToken })) {
          // text pieces are not needed
        }
      });
      // (The same request as after the reload: a failed call keeps the history.)
      const after = await failure(() => m.generateTokens([...ids, ...got], { maxTokens: 2 }));
      const devices = window.gpuDevices.length;
      const t0 = performance.now();
      await m.reload();
      const reloadMs = performance.now() - t0;
      const rest = await m.generateTokens([...ids, ...got], { maxTokens: n - got.length });
      return {
        inFlight, after, lost, got, rest, destroyedAt, reloadMs, ids: ids.length,
        stats: m.stats(), info: m.info, newDevices: window.gpuDevices.length - devices,
      };
    }, { prompt: want.prompt, n: want.tokens.length });
    assert.equal(r.inFlight.code, 'GPU_LOST', `the call in flight: ${r.inFlight.code} ${r.inFlight.message}`);
    const ms = r.inFlight.at - r.destroyedAt;
    console.log(`     GPU_LOST ${ms.toFixed(0)} ms after destroy(); reload ${r.reloadMs.toFixed(0)} ms: ${r.inFlight.message}`);
    assert.ok(ms < 1000, `GPU_LOST within a second (${ms} ms)`);
    assert.equal(r.after.code, 'GPU_LOST', 'a call before reload() fails at once too');
    assert.equal(r.lost.length, 1, `onDeviceLost is called once: ${JSON.stringify(r.lost)}`);
    assert.equal(r.lost[0].reason, 'destroyed');
    assert.equal(r.got.length, 3);
    assert.equal(r.newDevices, 1, 'reload() opened a new device');
    assert.equal(r.info.shardsFromCache, r.info.shards, 'reload() read every shard from Cache Storage');
    assert.deepEqual([...r.got, ...r.rest], want.tokens, 'the chat goes on to the undisturbed greedy tokens');
    assert.equal(r.stats.reusedTokens, r.ids + r.got.length - 1, 'the KV cache was refilled from the kept history');
    // autoReload: a device lost while idle is reloaded at once (the event carries it).
    const auto = await page.evaluate(async ({ prompt, n }) => {
      let event;
      const lost = new Promise((resolve) => {
        event = resolve;
      });
      const m = await window.Pocket.load('/models/tiny/', { backend: 'webgpu', autoReload: true, onDeviceLost: event });
      window.gpuDevices.at(-1).destroy();
      const e = await lost;
      await new Promise((r) => setTimeout(r, 0));
      const during = await m.generateTokens(prompt, { maxTokens: 1 }).then(() => 'none', (err) => err.code);
      await e.reload;
      return { reason: e.reason, during, tokens: await m.generateTokens(prompt, { maxTokens: n }) };
    }, { prompt: want.prompt, n: want.tokens.length });
    assert.equal(auto.reason, 'destroyed');
    assert.equal(auto.during, 'BUSY', 'a call while the model reloads is BUSY');
    assert.deepEqual(auto.tokens, want.tokens, 'the automatically reloaded model generates like native');
  },
});

Object.assign(tests, {
  // Item 4 in Worker mode: the worker's device (reached through the documented test hook)
  // is lost between two requests; the next one is GPU_LOST, the page is told, and
  // reload() in the worker continues the same greedy tokens.
  async in_a_worker_a_lost_device_is_reported_and_reload_continues({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    const r = await page.evaluate(async ({ prompt, n }) => {
      const { createWorker } = await import('/pkg/pocket.js');
      const worker = createWorker('/pkg/worker.js');
      let onDeviceLost;
      const lost = new Promise((resolve) => {
        onDeviceLost = resolve;
      });
      const m = await worker.load('/models/tiny/', { backend: 'webgpu', onDeviceLost });
      const ids = await m.encode(prompt);
      const tokens = async (p, k) => {
        const out = [];
        for await (const _ of m.generate(p, { maxTokens: k, onToken: (t) => out.push(t.token) })) {
          // text pieces are not needed
        }
        return out;
      };
      const first = await tokens(ids, 3);
      const destroyed = await m.destroyDeviceForTesting();
      const event = await lost;
      const code = await tokens([...ids, ...first], 2).then(() => 'none', (e) => e.code);
      await m.reload();
      const rest = await tokens([...ids, ...first], n - first.length);
      const stats = await m.stats();
      worker.terminate();
      return { first, destroyed, event, code, rest, reused: stats.reusedTokens, ids: ids.length };
    }, { prompt: want.prompt, n: want.tokens.length });
    assert.equal(r.destroyed, true);
    assert.equal(r.event.reason, 'destroyed', JSON.stringify(r.event));
    assert.equal(r.code, 'GPU_LOST');
    assert.deepEqual([...r.first, ...r.rest], want.tokens, 'the reloaded worker model goes on like native');
    assert.equal(r.reused, r.ids + r.first.length - 1, 'its KV cache was refilled');
  },
});

Object.assign(tests, {
  // Items 2 and 3 for a GGUF URL (streamed and converted on the fly): its pieces and
  // header come from the cache with the browser offline (no request); over the quota it
  // is QUOTA after the first piece (which holds the header that says how big the file
  // is), and nothing is stored; overQuota: "uncached" loads it without storing a piece.
  async gguf_urls_start_offline_and_check_the_quota({ page, context, server, fixture }) {
    const url = '/models/tiny/tiny.gguf';
    const ggufBytes = fs.statSync(path.join(fixture, 'tiny.gguf')).size;
    const prompt = expected(fixture).prompt;
    const tokens = () => page.evaluate((p) => window.model.generateTokens(p, { maxTokens: 8 }), prompt);
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    const online = await load(page, url);
    assert.ok(online.info, `GGUF load failed: ${online.code} ${online.message}`);
    assert.equal(online.info.source, 'network');
    const want = await tokens();
    await page.evaluate(() => window.model.unload());
    const seen = await loadsOffline({ page, context, server }, url, {}, async (r) => {
      assert.deepEqual([r.info.shardsFromCache, r.info.shardsFetched], [r.info.shards, 0]);
      assert.deepEqual(await tokens(), want, 'the cached GGUF generates the same tokens');
    });
    assert.deepEqual(seen.filter((u) => u.includes('/models/')), [], 'the page made none');
    await context.setOffline(false);
    // Over the quota: QUOTA naming the file's bytes, and nothing left in the cache.
    await page.evaluate((c) => caches.delete(c), CACHE);
    await fakeQuota(page, 4096);
    server.requests.length = 0;
    const over = await load(page, url);
    assert.equal(over.code, 'QUOTA', over.message);
    const [, needed] = /needs (\d+) more bytes/.exec(over.message) ?? [];
    assert.equal(Number(needed), ggufBytes, `the message names the file's bytes: ${over.message}`);
    assert.equal(server.requests.filter((r) => r.startsWith(url)).length, 1, 'only the first piece was read');
    assert.deepEqual(await cachedKeys(page), [], 'nothing was stored, not even the first piece');
    const uncached = await load(page, url, { overQuota: 'uncached' });
    assert.ok(uncached.info, `load failed: ${uncached.code} ${uncached.message}`);
    assert.match(uncached.info.uncached, /loaded without caching/);
    assert.deepEqual(await tokens(), want);
    assert.deepEqual(await cachedKeys(page), [], 'no piece was stored');
    await fakeQuota(page, null);
  },

  // delete(url) of one of two records that name the same files (a package loaded as its
  // folder and as its manifest) leaves the other whole.
  async delete_keeps_the_files_another_cached_model_shares({ page, server }) {
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    for (const url of ['/models/tiny/', '/models/tiny/manifest.json']) {
      const r = await load(page, url);
      assert.ok(r.info, `load of ${url} failed: ${r.code} ${r.message}`);
      await page.evaluate(() => window.model.unload());
    }
    assert.equal((await cacheCall(page, 'list')).length, 2);
    assert.equal(await cacheCall(page, 'delete', '/models/tiny/manifest.json'), true);
    const list = await cacheCall(page, 'list');
    assert.deepEqual(
      list.map((e) => [e.url, e.complete]),
      [[`${server.url}/models/tiny/`, true]],
      'the other record is still complete',
    );
    server.requests.length = 0;
    const again = await load(page, '/models/tiny/');
    assert.equal(again.info?.shardsFetched, 0, 'its load needs no download');
    assert.equal(await cacheCall(page, 'delete', '/models/tiny/'), true);
    assert.deepEqual(await cachedKeys(page), [], 'the last record takes the shared files with it');
  },
});

// 10,000 generated tokens in one session with a 64-position context (a sliding window,
// contextOverflow: "slide"), on WebGPU and on the CPU backend: wasm memory, the JS heap
// and the GPU buffers created are sampled every 1,000 tokens and must stay flat after the
// first 1,000. Long: runs only when named (`scripts/test-web long_`).
Object.assign(tests, {
  async long_session_memory_stays_flat_over_10000_tokens({ page, server }) {
    await plainPage(page, server);
    const figures = {};
    for (const backend of ['webgpu', 'cpu']) {
      const r = await page.evaluate(
        async ({ backend }) => {
          const { wasmMemoryBytes } = await import('/pkg/pocket.js');
          const m = await window.Pocket.load('/models/tiny/', { backend, contextLength: 64 });
          const samples = [];
          let ids = m.encode('A long story, told without end: once upon a time');
          let n = 0;
          let shifts = 0;
          const t0 = performance.now();
          while (n < 10000) {
            const out = [];
            const onToken = async (p) => {
              out.push(p.token);
              n += 1;
              if (n % 1000 === 0) {
                const tokens = n;
                samples.push({
                  tokens,
                  wasm: await wasmMemoryBytes(),
                  heap: performance.memory?.usedJSHeapSize ?? null,
                  gpu: m.gpuBytes(),
                  s: (performance.now() - t0) / 1000,
                });
              }
            };
            const opts = { maxTokens: 10000 - n, contextOverflow: 'slide', keep: 8, onToken };
            for await (const _ of m.generate(ids, opts)) {
              // text pieces are not needed
            }
            shifts += m.stats().contextShifts;
            // An end of sequence: the same session goes on after it (the window keeps
            // the first 8 tokens and the newest).
            ids = [...ids, ...out];
          }
          m.unload();
          samples.sort((a, b) => a.tokens - b.tokens);
          return { samples, shifts };
        },
        { backend },
      );
      figures[backend] = r;
      for (const s of r.samples) {
        console.log(
          `     ${backend} ${s.tokens} tokens: wasm ${(s.wasm / 2 ** 20).toFixed(2)} MiB, JS heap ` +
            `${s.heap === null ? '-' : (s.heap / 2 ** 20).toFixed(2) + ' MiB'}, GPU buffers ${s.gpu} B, ${s.s.toFixed(1)} s`,
        );
      }
      assert.equal(r.samples.length, 10, JSON.stringify(r.samples));
      assert.ok(r.shifts > 300, `the window slid: ${r.shifts} shifts`);
      const [first, ...later] = r.samples;
      for (const s of later) {
        assert.equal(s.wasm, first.wasm, `${backend}: wasm memory grew by ${s.tokens} tokens`);
        assert.equal(s.gpu, first.gpu, `${backend}: GPU buffers were created by ${s.tokens} tokens`);
        // The JS heap is garbage-collected: 4 MiB of slack for collections not yet run.
        if (s.heap !== null) assert.ok(s.heap < first.heap + 4 * 2 ** 20, `${backend}: JS heap grew: ${JSON.stringify(s)}`);
      }
    }
  },
});
