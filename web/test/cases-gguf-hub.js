// Browser tests of GGUF URLs and hub ids (run by run.js with
// cases.js). Each gets { page, context, server, fixture, scratch, results }.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { CACHE, expected, load, loadsInLittleMemory, plainPage } from './cases.js';

const GGUF = '/models/tiny/tiny.gguf';
const ggufRequests = (server) => server.requests.filter((r) => r.endsWith('.gguf'));

/** Greedy tokens of the loaded model (`window.model`) for the fixture's prompt. */
function greedy(page, want) {
  return page.evaluate(
    async ({ prompt, n }) => ({
      ids: window.model.encode(prompt),
      tokens: await window.model.generateTokens(prompt, { maxTokens: n }),
    }),
    { prompt: want.prompt, n: want.gguf_tokens.length },
  );
}

/** A hub repository folder `name` in the scratch dir holding `files` (name → bytes or path). */
function hubRepo(server, scratch, id, files) {
  const dir = path.join(scratch, id.replace('/', '--'));
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, src] of Object.entries(files)) {
    if (typeof src === 'string') fs.copyFileSync(src, path.join(dir, name));
    else fs.writeFileSync(path.join(dir, name), src);
  }
  server.hub[id] = dir;
}

export const tests = {
  async a_gguf_url_streams_generates_like_native_and_loads_again_from_the_cache({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    await page.evaluate((c) => caches.delete(c), CACHE);
    const first = await load(page, GGUF);
    assert.ok(first.info, `load failed: ${first.code} ${first.message}`);
    assert.ok(ggufRequests(server).length >= 1, 'the first load fetches the GGUF');
    assert.equal(first.info.shardsFetched, first.info.shards, 'every piece is fetched');
    assert.equal(first.info.bytes, fs.statSync(path.join(fixture, 'tiny.gguf')).size);
    const got = await greedy(page, want);
    assert.deepEqual(got.ids, want.gguf_prompt_ids, 'the GGUF tokenizer encodes like native');
    assert.deepEqual(got.tokens, want.gguf_tokens, 'greedy tokens equal the native engine on the GGUF');

    await page.evaluate(() => window.model.unload());
    server.requests.length = 0;
    const second = await load(page, GGUF);
    assert.ok(second.info, `second load failed: ${second.code} ${second.message}`);
    assert.deepEqual(ggufRequests(server), [], 'no network request for the GGUF on the second load');
    assert.equal(second.info.shardsFromCache, second.info.shards);
    assert.deepEqual((await greedy(page, want)).tokens, want.gguf_tokens, 'the cached GGUF generates alike');
    console.log(`     GGUF first load ${first.ms.toFixed(0)} ms, cached ${second.ms.toFixed(0)} ms`);
  },

  // A GGUF of mixed types (three matrices Q8_0, the rest Q4_1, as a Q4_K_M file mixes):
  // `weights: keep` (the default) streams the Q8_0 ones to WebGPU as Q8 g32 with native's
  // tokens; an unknown weights name is a typed error.
  async a_gguf_with_q8_0_matrices_keeps_them_on_webgpu_like_native({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const r = await load(page, '/models/tiny/tiny-q8.gguf', { cache: false });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    assert.equal(r.info.backend, 'webgpu');
    const got = await greedy(page, want);
    assert.deepEqual(got.tokens, want.gguf_q8_tokens, `greedy tokens equal native (${want.gguf_q8_engine})`);
    assert.notDeepEqual(want.gguf_q8_tokens, want.gguf_tokens, 'the Q8_0 matrices change the tokens');
    await page.evaluate(() => window.model.unload());
    const bad = await load(page, '/models/tiny/tiny-q8.gguf', { cache: false, weights: 'q5' });
    assert.equal(bad.code, 'INVALID_ARGUMENT', bad.message);
    assert.match(bad.message, /expected q4, q8 or keep/);
  },

  // GGUF URLs on the CPU backend (Safari without WebGPU): `backend: "cpu"` converts into
  // wasm memory with the native CPU backend's tokens; `auto` on the software adapter takes
  // the CPU backend for a GGUF with Q8_0 matrices (as for a Q8 package), as stored.
  async a_gguf_url_loads_on_the_cpu_backend_like_native({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const r = await load(page, GGUF, { cache: false, backend: 'cpu' });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    assert.equal(r.info.backend, 'cpu');
    assert.match(r.info.backendReason, /requested/);
    const got = await greedy(page, want);
    assert.deepEqual(got.ids, want.gguf_prompt_ids);
    assert.deepEqual(got.tokens, want.gguf_cpu_tokens, 'greedy tokens equal the native CPU backend on the GGUF');
    await page.evaluate(() => window.model.unload());
    const q8 = await load(page, '/models/tiny/tiny-q8.gguf', { cache: false, backend: 'auto' });
    assert.ok(q8.info, `load failed: ${q8.code} ${q8.message}`);
    assert.equal(q8.info.backend, 'cpu', q8.info.backendReason);
    assert.match(q8.info.backendReason, /Q8 g32/);
    assert.deepEqual((await greedy(page, want)).tokens, want.gguf_q8_cpu_tokens, `greedy tokens equal native (${want.gguf_q8_cpu_engine})`);
  },

  async a_gguf_streams_with_progress_from_a_server_without_ranges({ page, server, fixture }) {
    const want = expected(fixture);
    await plainPage(page, server);
    server.state.noRanges = true;
    let backend;
    try {
      const r = await page.evaluate(async (url) => {
        const events = [];
        const m = await window.Pocket.load(url, { cache: false, onProgress: (e) => events.push(e) });
        window.model = m;
        return { info: m.info, events };
      }, GGUF);
      const phases = [...new Set(r.events.map((e) => e.phase))];
      assert.deepEqual(phases, ['download', 'manifest', 'tokenizer', 'ready'], 'progress phases');
      const last = r.events.at(-1);
      assert.equal(last.loaded, last.total, 'every byte counted');
      assert.equal(last.total, r.info.bytes);
      backend = r.info.backend;
      // `auto` on SwiftShader: the software adapter's probe decides, as for a package.
      assert.match(r.info.backendReason, /software adapter/);
    } finally {
      server.state.noRanges = false;
    }
    const tokens = backend === 'cpu' ? want.gguf_cpu_tokens : want.gguf_tokens;
    assert.deepEqual((await greedy(page, want)).tokens, tokens, `on ${backend}`);
  },

  async a_190_mb_gguf_streams_with_under_32_mb_of_wasm_memory_growth({ page, server }) {
    assert.ok(server.models.large, 'POCKETRT_WEB_LARGE names the folder of large.gguf');
    await loadsInLittleMemory(page, server, '/models/large/large.gguf', 'GGUF');
  },

  async bad_gguf_input_gives_coded_errors({ page, server, scratch }) {
    await plainPage(page, server);
    const dir = path.join(scratch, 'badgguf');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'page.gguf'), '<!doctype html><p>not a model</p>');
    fs.writeFileSync(path.join(dir, 'cut.gguf'), fs.readFileSync(path.join(server.models.tiny, 'tiny.gguf')).subarray(0, 60000));
    server.models.badgguf = dir;
    for (const [url, code, message] of [
      ['/models/tiny/missing.gguf', 'NETWORK', /HTTP 404/],
      ['/models/badgguf/page.gguf', 'BAD_MODEL', /GGUF/],
      ['/models/badgguf/cut.gguf', 'BAD_MODEL', /truncated|needs|bytes/],
    ]) {
      const r = await load(page, url, { cache: false });
      assert.equal(r.code, code, `${url}: ${r.message}`);
      assert.match(r.message, message, url);
    }
  },

  async a_hub_id_picks_the_best_file_like_the_native_client({ page, server, fixture, scratch }) {
    const want = expected(fixture);
    await plainPage(page, server);
    const gguf = path.join(fixture, 'tiny.gguf');
    // Q4_1 is the lossless choice; the other file is not even a model.
    hubRepo(server, scratch, 'test-org/tiny-GGUF', {
      'tiny-Q4_1.gguf': gguf,
      'tiny-F16.gguf': Buffer.from('not a model'),
      'README.md': Buffer.from('# tiny'),
    });
    const hubEndpoint = `${server.url}/hub`;
    server.requests.length = 0;
    const r = await load(page, 'test-org/tiny-GGUF', { hubEndpoint, cache: false });
    assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
    assert.deepEqual(server.requests.filter((q) => q.startsWith('/hub/')), [
      '/hub/api/models/test-org/tiny-GGUF',
      '/hub/test-org/tiny-GGUF/resolve/main/tiny-Q4_1.gguf',
    ]);
    assert.deepEqual((await greedy(page, want)).tokens, want.gguf_tokens);
    // A repository holding a pocket package: the package wins over its GGUF.
    hubRepo(server, scratch, 'test-org/tiny-pocket', Object.fromEntries(
      fs.readdirSync(fixture, { withFileTypes: true })
        .filter((e) => e.isFile()) // the fixture's own files (not the api package folder)
        .map((e) => [e.name, path.join(fixture, e.name)]),
    ));
    server.requests.length = 0;
    const p = await load(page, 'test-org/tiny-pocket', { hubEndpoint, cache: false });
    assert.ok(p.info, `load failed: ${p.code} ${p.message}`);
    assert.ok(server.requests.includes('/hub/test-org/tiny-pocket/resolve/main/manifest.json'));
    assert.ok(!server.requests.some((q) => q.endsWith('.gguf')), 'the package is chosen');
    const tokens = await page.evaluate(
      ({ p, n }) => window.model.generateTokens(p, { maxTokens: n }),
      { p: want.prompt, n: want.tokens.length },
    );
    assert.deepEqual(tokens, want.tokens);
    // An unknown id is a clear network error.
    const missing = await load(page, 'test-org/nothing', { hubEndpoint });
    assert.equal(missing.code, 'NETWORK', missing.message);
    assert.match(missing.message, /404/);
  },

  async a_hub_id_asks_huggingface_by_default({ page, server }) {
    await plainPage(page, server);
    const asked = [];
    await page.route('https://huggingface.co/**', (route) => {
      asked.push(route.request().url());
      return route.fulfill({
        status: 200,
        contentType: 'application/json',
        headers: { 'access-control-allow-origin': '*' },
        body: '{"siblings":[]}',
      });
    });
    const r = await load(page, 'taobao-mnn/MNN-Pocket-0.3B-GGUF');
    assert.deepEqual(asked, ['https://huggingface.co/api/models/taobao-mnn/MNN-Pocket-0.3B-GGUF?blobs=true']);
    assert.equal(r.code, 'NETWORK');
    assert.match(r.message, /no model file/);
  },
};
