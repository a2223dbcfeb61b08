// Browser tests of speculative decoding (`speculative`: run by run.js with cases.js), on
// the tiny fixture, on WebGPU (SwiftShader) and on the CPU backend: the drafts a step
// verifies change nothing of the text — greedy tokens equal the plain decoder's, a seeded
// sampled run repeats — while drafts are accepted; the option is checked where it is
// given, and the load's default reaches requests in a Worker. Each gets { page, context,
// server, fixture, scratch, results }.
import assert from 'node:assert/strict';
import { load, plainPage } from './cases.js';

/** Runs in the page on `window.model`: a prompt that repeats itself (the fixture's prompt
 * P, the model's own greedy continuation G, then P again: lookup drafts G's start, which
 * the model continues with), and what generating after it gives: greedy without
 * speculation, with `"lookup"`, with `{ draftMax: 2 }`, and a seeded sampled run with
 * lookup twice — each run's tokens and stats. */
async function speculativeRuns(n) {
  const m = window.model;
  const p = m.encode('Hello, pocket!');
  const g = await m.generateTokens(p, { maxTokens: 24 });
  const prompt = [...p, ...g, ...p];
  const run = async (options) => {
    const tokens = await m.generateTokens(prompt, { maxTokens: n, ...options });
    return { tokens, stats: m.stats() };
  };
  const sampled = { temperature: 0.3, topK: 40, topP: 0.97, seed: 2, speculative: 'lookup' };
  return {
    plain: await run({}),
    lookup: await run({ speculative: 'lookup' }),
    two: await run({ speculative: { draftMax: 2 } }),
    sampled: [await run(sampled), await run(sampled)],
  };
}

export const tests = {
  // Greedy with lookup drafts gives the plain decoder's tokens, on WebGPU (drafts
  // verified in one submit, only their argmaxes read back) and on the CPU backend (one
  // prefill chunk), with drafts accepted; with `draftMax: 2`, at most 2 a step; a seeded
  // sampled run (WebGPU: the verified rows' logits read back, the drafts accepted by the
  // rejection rule; at temperature 0.3 some are kept, some not) repeats.
  async speculative_lookup_keeps_the_greedy_tokens_and_seeded_runs_on_webgpu_and_the_cpu_backend({ page, server }) {
    const N = 32;
    await plainPage(page, server);
    for (const backend of ['webgpu', 'cpu']) {
      const r = await load(page, '/models/tiny/', { backend, cache: false, contextLength: 256 });
      assert.ok(r.info, `${backend}: load failed: ${r.code} ${r.message}`);
      assert.equal(r.info.backend, backend);
      const got = await page.evaluate(speculativeRuns, N);
      const { plain, lookup, two, sampled } = got;
      const spec = lookup.stats.speculation;
      console.log(`     ${backend}: lookup ${JSON.stringify(spec)}; draftMax 2 ${JSON.stringify(two.stats.speculation)}; sampled ${JSON.stringify(sampled[0].stats.speculation)}`);
      assert.equal(plain.tokens.length, N, `${backend}: no early end of sequence`);
      assert.equal(plain.stats.speculation, null, `${backend}: no speculation unless asked`);
      assert.deepEqual(lookup.tokens, plain.tokens, `${backend}: greedy with lookup drafts gives the plain tokens`);
      assert.deepEqual(two.tokens, plain.tokens, `${backend}: greedy with draftMax 2 gives the plain tokens`);
      assert.ok(spec.steps > 0 && spec.accepted > 0, `${backend}: drafts were verified and accepted: ${JSON.stringify(spec)}`);
      assert.ok(spec.accepted <= spec.drafted);
      assert.ok(spec.accepted + spec.steps <= N + 1, `${backend}: a step takes its accepted drafts and one more`);
      const s2 = two.stats.speculation;
      assert.ok(s2.steps > 0 && s2.drafted <= 2 * s2.steps, `${backend}: at most 2 drafts a step: ${JSON.stringify(s2)}`);
      assert.deepEqual(sampled[1].tokens, sampled[0].tokens, `${backend}: a seeded sampled run with drafts repeats`);
      assert.deepEqual(sampled[1].stats.speculation, sampled[0].stats.speculation);
      assert.ok(sampled[0].stats.speculation.accepted > 0, `${backend}: the sampled run accepted drafts`);
      assert.notDeepEqual(sampled[0].tokens, plain.tokens, `${backend}: the sampled run is not greedy`);
      await page.evaluate(() => window.model.unload());
    }
  },

  // The option is checked at the load and per request (a clear INVALID_ARGUMENT; a draft
  // model is UNSUPPORTED for now); the load's default applies to generate() and to
  // OpenAI-style requests, a request's `false` turns it off, and all of it crosses the
  // Worker boundary.
  async speculative_option_is_checked_and_the_load_default_reaches_a_worker({ page, server }) {
    await plainPage(page, server);
    const got = await page.evaluate(async () => {
      const { Pocket, createWorker } = await import('/pkg/pocket.js');
      const base = { backend: 'cpu', cache: false, contextLength: 256 };
      const failure = (p) => p.then(() => null, (e) => ({ code: e.code, message: e.message }));
      const loads = {};
      for (const [name, speculative] of Object.entries({ name: 'ngram', zero: { draftMax: 0 }, many: { draftMax: 33 }, half: { draftMax: 1.5 }, draft: { draft: '/models/tiny/tiny.gguf' }, typo: { draftmax: 4 }, number: 4 })) {
        loads[name] = await failure(Pocket.load('/models/tiny/', { ...base, speculative }));
      }
      const w = createWorker('/pkg/worker.js');
      try {
        const m = await w.load('/models/tiny/', { ...base, speculative: { draftMax: 4 } });
        const prompt = 'Hello, pocket! Hello, pocket! Hello, pocket!';
        const drain = async (it) => {
          for await (const _ of it) {
            // the stats are what is checked
          }
        };
        await drain(m.generate(prompt, { maxTokens: 16 }));
        const byDefault = (await m.stats()).speculation;
        await drain(m.generate(prompt, { maxTokens: 16, speculative: false }));
        const off = (await m.stats()).speculation;
        const request = await failure(drain(m.generate(prompt, { maxTokens: 4, speculative: 'fast' })));
        await m.completions.create({ prompt, max_tokens: 16 });
        const openai = (await m.stats()).speculation;
        return { loads, byDefault, off, request, openai };
      } finally {
        w.terminate();
      }
    });
    for (const [name, e] of Object.entries(got.loads)) {
      assert.ok(e, `speculative ${name}: the load fails`);
      assert.equal(e.code, name === 'draft' ? 'UNSUPPORTED' : 'INVALID_ARGUMENT', `speculative ${name}: ${e.message}`);
      assert.match(e.message, /speculative/, `the message names the option: ${e.message}`);
    }
    assert.match(got.loads.draft.message, /draft model/);
    assert.match(got.loads.many.message, /draftMax must be a whole number 1 to 32/);
    assert.ok(got.byDefault && got.byDefault.steps > 0, `the load's default speculates: ${JSON.stringify(got.byDefault)}`);
    assert.ok(got.byDefault.drafted <= 4 * got.byDefault.steps, 'its draftMax holds');
    assert.equal(got.off, null, "a request's false turns it off");
    assert.equal(got.request?.code, 'INVALID_ARGUMENT', `a bad request option: ${JSON.stringify(got.request)}`);
    assert.ok(got.openai && got.openai.steps > 0, `an OpenAI-style request takes the load's default: ${JSON.stringify(got.openai)}`);
  },
};
