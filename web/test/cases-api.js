// Browser tests of the OpenAI-shaped API (run by run.js with cases.js): every request
// fixture of tests/fixtures/api runs through `model.chat.completions.create` /
// `model.completions.create` on the fixture's api package, on WebGPU and on the CPU
// backend, in the page and in a Worker, and must give the responses and chunks the native
// engine gave on the same backend (web_fixture's api_expected.json; ids and times aside,
// logprobs to 1e-2; on the CPU backend what is decided before the first token, see
// beforeGeneration), and `model.embeddings.create` first gives the native embeddings
// (compareEmbeddings). Each gets { page, context, server, fixture, scratch, results }.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { plainPage } from './cases.js';

/** The text of a response (chat or text) or of a stream's chunks. */
function contentOf(o) {
  if (Array.isArray(o)) return o.map((k) => (k.choices ?? []).map((c) => c.delta?.content ?? c.text ?? '').join('')).join('');
  const c = o?.choices?.[0];
  return c?.message?.content ?? c?.text ?? '';
}

function apiExpected(fixture) {
  return JSON.parse(fs.readFileSync(path.join(fixture, 'api_expected.json'), 'utf8'));
}

/** Runs in the page: the embeddings request first (as natively: it must leave the model
 * as it was), then every fixture's requests in order on one model, with `$replyN[a..b]`
 * replaced by earlier replies' text; stream requests give their chunks, others their
 * response, errors their OpenAI body. */
async function runFixtures({ fixtures, embeddingsRequest, backend, worker }) {
  const { Pocket, createWorker } = await import('/pkg/pocket.js');
  const options = { backend, cache: false, contextLength: 2048 };
  const w = worker ? createWorker('/pkg/worker.js') : null;
  const model = w ? await w.load('/models/tiny/api/', options) : await Pocket.load('/models/tiny/api/', options);
  const contentOf = (o) => {
    if (o.response) {
      const c = o.response.choices?.[0];
      return c?.message?.content ?? c?.text ?? '';
    }
    return (o.chunks ?? []).map((k) => k.choices.map((c) => c.delta?.content ?? c.text ?? '').join('')).join('');
  };
  const substitute = (v, done) => {
    if (typeof v === 'string' && v.startsWith('$reply')) {
      const m = /^\$reply(\d+)(?:\[(\d+)\.\.(\d+)\])?$/.exec(v);
      const text = contentOf(done[Number(m[1])]);
      return m[2] === undefined ? text : Array.from(text).slice(Number(m[2]), Number(m[3])).join('');
    }
    if (Array.isArray(v)) return v.map((x) => substitute(x, done));
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x, done)]));
    return v;
  };
  const out = [];
  let embeddings;
  try {
    embeddings = await model.embeddings.create(embeddingsRequest);
    for (const f of fixtures) {
      const done = [];
      for (const raw of f.doc.requests) {
        const req = substitute(raw, done);
        const api = f.doc.kind === 'completion' ? model.completions : model.chat.completions;
        try {
          const r = await api.create(req);
          if (req.stream) {
            const chunks = [];
            for await (const c of r) chunks.push(c);
            done.push({ chunks });
          } else {
            done.push({ response: r });
          }
        } catch (e) {
          if (!e.error) throw e;
          done.push({ response: { error: e.error }, status: e.status, code: e.code });
        }
      }
      out.push({ name: f.name, outcomes: done });
    }
  } finally {
    await model.unload();
    w?.terminate();
  }
  return { fixtures: out, embeddings };
}

/** The browser's embeddings response against the native one: the same shape and usage;
 * on WebGPU (the native run's kernels) each value within 2e-3, on the CPU backend (simd128
 * against AVX2 roundings) each vector at cosine ≥ 0.99. The two inputs' vectors differ
 * (cosine < 0.95), so a vector of the wrong input fails. */
function compareEmbeddings(got, want, backend, what) {
  assert.equal(got.object, 'list', what);
  assert.deepEqual(got.usage, want.usage, `${what}: usage`);
  assert.equal(got.data.length, want.data.length, `${what}: inputs`);
  const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  const [v0, v1] = want.data.map((d) => d.embedding);
  assert.ok(dot(v0, v1) < 0.95, `${what}: the native vectors of two texts are alike (${dot(v0, v1)})`);
  const figures = [];
  for (const [i, d] of got.data.entries()) {
    const [a, b] = [d.embedding, want.data[i].embedding];
    assert.equal(d.index, i, what);
    assert.equal(a.length, b.length, `${what}[${i}]: length`);
    const worst = Math.max(...a.map((x, k) => Math.abs(x - b[k])));
    figures.push(`max |Δ| ${worst.toExponential(1)}, cosine ${dot(a, b).toFixed(6)}`);
    if (backend === 'webgpu') {
      assert.ok(worst <= 2e-3, `${what}[${i}]: differs from native by ${worst}`);
    } else {
      assert.ok(dot(a, b) >= 0.99, `${what}[${i}]: cosine ${dot(a, b)} to native`);
    }
  }
  console.log(`     ${what} against native: ${figures.join('; ')} (two texts at cosine ${dot(v0, v1).toFixed(3)})`);
}

/** Ids, times and timings removed (they differ run to run), as natively. */
function normalized(v) {
  if (Array.isArray(v)) return v.map(normalized);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => !['id', 'created', 'timings'].includes(k))
        .map(([k, x]) => [k, normalized(x)]),
    );
  }
  return v;
}

/** Equal; numbers with a fraction (logprobs) to `tol`. */
function same(a, b, tol) {
  if (typeof a === 'number' && typeof b === 'number') {
    return Number.isInteger(a) && Number.isInteger(b) ? a === b : Math.abs(a - b) <= tol;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i], tol));
  }
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && same(a[k], b[k], tol));
  }
  return a === b;
}

/** What the CPU backend must reproduce of a native outcome. Its int8 dot products are
 * simd128 here and AVX2 natively, whose roundings differ (on this sharp random model
 * logprobs move by up to ~0.2 and a greedy choice can flip a few tokens in: an issue-29
 * finding), so generated text is not compared there; everything decided before the first
 * token is: errors, the prompt's token count and the KV reuse (the template, tokenizer and
 * cache in wasm), the object, and a stream's opening chunk. */
function beforeGeneration(o) {
  if (Array.isArray(o)) return o.slice(0, 1);
  if (o.error) return o;
  return { object: o.object, model: o.model, prompt_tokens: o.usage?.prompt_tokens, details: o.usage?.prompt_tokens_details };
}

async function compareWithNative(page, server, fixture, backend, worker) {
  const expected = apiExpected(fixture);
  const side = backend === 'webgpu' ? 'gpu' : 'cpu';
  const want = expected[side];
  assert.ok(want.length >= 20, `${want.length} fixtures`);
  await plainPage(page, server);
  const fixtures = want.map((f) => ({ name: f.name, doc: f.doc }));
  const embeddingsRequest = expected.embeddings.request;
  const run = await page.evaluate(runFixtures, { fixtures, embeddingsRequest, backend, worker });
  const got = run.fixtures;
  const where = `embeddings on ${backend}${worker ? ' in a Worker' : ''}`;
  compareEmbeddings(run.embeddings, expected.embeddings[side], backend, where);
  let requests = 0;
  let errors = 0;
  const mismatches = [];
  for (const [i, f] of want.entries()) {
    for (const [j, native] of f.outcomes.entries()) {
      const mine = got[i].outcomes[j];
      const what = `${f.name}[${j}] on ${backend}${worker ? ' in a Worker' : ''}`;
      const stream = f.doc.requests[j].stream && !native.response.error;
      let [a, b] = stream ? [mine.chunks, native.chunks] : [mine.response, native.response];
      assert.ok(a, `${what}: nothing came back (${JSON.stringify(mine).slice(0, 300)})`);
      a = normalized(a);
      if (backend === 'cpu') [a, b] = [beforeGeneration(a), beforeGeneration(b)];
      // WebGPU runs the very kernels of the native run (the swiftshader profile).
      if (!same(a, b, 1e-2)) {
        const sampled = (f.doc.requests[j].temperature ?? 1) > 0;
        const [x, y] = [contentOf(a), contentOf(b)];
        let common = 0;
        while (common < x.length && x[common] === y[common]) common += 1;
        mismatches.push({ what, sampled, common, detail: `browser ${JSON.stringify(a)}\nnative  ${JSON.stringify(b)}` });
      }
      if (native.response.error) {
        errors += 1;
        assert.equal(mine.status, 400, `${what}: status`);
        assert.equal(mine.code, 'INVALID_ARGUMENT', `${what}: code`);
      }
      requests += 1;
    }
  }
  // A sampled draw that falls within float rounding of a boundary between two tokens may
  // go the other way on another adapter (native lavapipe vs the browser's SwiftShader): one
  // such request is allowed, and only after the same start. Greedy requests, errors and
  // every other sampled request must be equal; a bug in the browser's path breaks many.
  const flips = mismatches.filter((m) => m.sampled && m.common >= 4);
  for (const m of flips) console.log(`     a sampled draw went the other way after ${m.common} characters: ${m.what}`);
  const wrong = mismatches.filter((m) => !flips.includes(m));
  assert.ok(wrong.length === 0 && flips.length <= 1, `${mismatches.length} of ${requests} requests differ:\n${mismatches.map((m) => `${m.what}: ${m.detail}`).join('\n')}`);
  console.log(`     ${requests} requests (${errors} bad ones) on ${backend}${worker ? ' in a Worker' : ''} gave the native ${backend === 'cpu' ? 'prompts and errors' : 'responses'}`);
}

export const tests = {
  async openai_requests_on_webgpu_give_the_native_responses_and_chunks({ page, server, fixture }) {
    await compareWithNative(page, server, fixture, 'webgpu', false);
  },

  async openai_requests_on_the_cpu_backend_give_the_native_responses_and_chunks({ page, server, fixture }) {
    await compareWithNative(page, server, fixture, 'cpu', false);
  },

  async openai_requests_in_a_worker_give_the_native_responses_and_chunks({ page, server, fixture }) {
    await compareWithNative(page, server, fixture, 'webgpu', true);
  },

  async an_aborted_stream_stops_and_the_model_answers_the_next_request({ page, server }) {
    await plainPage(page, server);
    const r = await page.evaluate(async () => {
      const { Pocket } = await import('/pkg/pocket.js');
      const model = await Pocket.load('/models/tiny/api/', { backend: 'webgpu', cache: false });
      const messages = [{ role: 'user', content: 'Tell me a long story.' }];
      const controller = new AbortController();
      const stream = await model.chat.completions.create(
        { messages, max_tokens: 200, temperature: 0, stream: true },
        { signal: controller.signal },
      );
      let chunks = 0;
      let code = null;
      try {
        for await (const _ of stream) {
          chunks += 1;
          if (chunks === 3) controller.abort();
        }
      } catch (e) {
        code = e.code;
      }
      const after = await model.chat.completions.create({ messages, max_tokens: 4, temperature: 0 });
      model.unload();
      return { chunks, code, finish: after.choices[0].finish_reason, tokens: after.usage.completion_tokens };
    });
    assert.equal(r.code, 'ABORTED');
    assert.equal(r.chunks, 3, 'no chunk after the abort');
    assert.deepEqual([r.finish, r.tokens], ['length', 4]);
  },
};
