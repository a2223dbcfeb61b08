// The browser decode benches (run by run.js only when named: `scripts/test-web bench`), on
// the Pocket-size package served as /models/bench/ (POCKETRT_WEB_BENCH_MODEL, default the
// large fixture; see benchModel). Each prints one JSON line.
import assert from 'node:assert/strict';
import { benchModel, load, plainPage } from './cases.js';

/** Load the bench package with `options` (no Cache Storage, 512 positions); returns
 * load()'s { info, ms }. */
async function loadBench({ page, server, scratch }, options) {
  benchModel(server, scratch);
  await plainPage(page, server);
  const r = await load(page, '/models/bench/', { cache: false, contextLength: 512, ...options });
  assert.ok(r.info, `load failed: ${r.code} ${r.message}`);
  return r;
}

/** Greedy decode of the loaded model: a 4-token warm-up, then `tokens` timed tokens after
 * another 4-token prompt; returns the model's stats of the timed run. */
function timeDecode(page, tokens) {
  return page.evaluate(async (n) => {
    await window.model.generateTokens([1, 2, 3, 4], { maxTokens: 4 }); // warm-up
    await window.model.generateTokens([5, 6, 7, 8], { maxTokens: n });
    return window.model.stats();
  }, tokens);
}

/** Print the bench's JSON line, then check every asked token was generated. */
function report(bench, fields, r, s, tokens) {
  console.log(JSON.stringify({ bench, ...fields, tokens: s.generatedTokens,
    tokens_per_second: s.tokensPerSecond, load_seconds: r.ms / 1000 }));
  assert.equal(s.generatedTokens, tokens, 'no early end of sequence skews the figure');
}

export const tests = {
  // At least 9.3 tokens/s (wllama's 2-thread figure on the CI machine) on the auto-chosen
  // backend.
  async bench_pocket_size_decodes_at_least_9_3_tokens_per_second_on_auto(ctx) {
    const BAR = 9.3;
    const r = await loadBench(ctx, { backend: 'auto' });
    const s = await timeDecode(ctx.page, 32);
    report('browser_decode', { backend: r.info.backend, reason: r.info.backendReason, bar: BAR }, r, s, 32);
    const tps = s.tokensPerSecond;
    assert.ok(tps >= BAR, `${tps.toFixed(2)} tok/s on ${r.info.backend} < ${BAR}`);
  },

  // On the WebGPU backend forced (on SwiftShader auto picks the CPU backend, so the auto
  // bench never times WebGPU); no speed bar, SwiftShader has none. POCKETRT_WEB_PKG serves
  // another build with this same case, e.g. the package from before the decode-speed work
  // (the web branch's f36bc6c), whose load has no backend option and whose info no
  // `backend`: such a build runs on WebGPU only. Measured on the 2-core machine
  // (/tmp/pocket-synth, alternating runs): before 0.70-0.72 tok/s, main with the lanes
  // decode attention 2.40-2.47 tok/s.
  async bench_pocket_size_decode_on_webgpu(ctx) {
    const TOKENS = 16; // SwiftShader decodes a Pocket-size model at a few tokens/s at most
    const r = await loadBench(ctx, { backend: 'webgpu' });
    const backend = r.info.backend ?? 'webgpu (build without a backend option)';
    assert.match(backend, /^webgpu/, 'the model runs on WebGPU');
    // What the page's WebGPU adapter says of itself (pocketrt names a nameless adapter).
    const gpu = await ctx.page.evaluate(async () => {
      const { vendor, architecture, description } = (await navigator.gpu.requestAdapter()).info;
      return `${vendor}/${architecture}${description ? ` (${description})` : ''}`;
    });
    const s = await timeDecode(ctx.page, TOKENS);
    report('browser_decode_webgpu', { adapter: r.info.adapter, gpu, backend, build: ctx.server.pkg }, r, s, TOKENS);
  },
};
