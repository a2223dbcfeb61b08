// Browser tests of the engine every tab of a site shares (`Pocket.load(url, { shared:
// true })`: web/src/shared.js, host.js), run by run.js on the tiny fixture on WebGPU,
// three pages of one origin:
// - in a SharedWorker: the weights are fetched once (one engine: one host, one GPU bytes
//   figure), the second and third `load` return in < 200 ms, a page's own memory grows
//   < 5 MB; the three stream their chats at the same time, each reply equal to the same
//   chat in a Worker of its own, each follow-up with its history in the KV cache (each
//   tab's conversation restored between the others' requests); closing the first page
//   leaves the engine to the other two;
// - without SharedWorker (leader election with Web Locks, the engine in the first tab's
//   Worker): the same chats; closing the hosting page while one tab streams and another
//   waits: the streaming request fails with HOST_LOST, the waiting one is sent again to
//   the tab that takes over and answers alike, both conversations go on from their
//   snapshots (no prefill), `onHostChange` tells both tabs, `info.shared.here` names the
//   host's tab;
// - an aborted shared load leaves no tab behind; an abort stops only its tab's request; a page closed while streaming frees the engine
//   for the others at once; a lost device is told to every tab, and after one reload
//   each conversation goes on.
// Each gets { page, context, server, fixture, scratch, results }.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { plainPage } from './cases.js';
import { helpers } from './cases-sessions.js';

const PROMPTS = ['Hello, pocket!', 'Tell me a story.', 'What is a tab?'];
const FOLLOW_UP = ['And then?', 'Go on.', 'Why?'];
/** The messages after the follow-up's reply (turns 2 and 3). */
const LATER = ['More.', 'Again.'];
const TURN = { max_tokens: 6, stream: true };

/** Page helper: `longReply(abort)` streams a long reply (450 tokens: the fixture's
 * context is 512) setting `window.streaming` at its first chunk; `abort`: aborts it
 * there. Gives { chunks } or { chunks, code, message }. */
function longHelpers() {
  window.longReply = async (abort) => {
    window.streaming = false;
    const controller = new AbortController();
    let chunks = 0;
    try {
      const request = { messages: [say('Talk.')], max_tokens: 450, stream: true, temperature: 0, logit_bias: { 97: 100 } };
      const r = await window.model.chat.completions.create(request, { signal: controller.signal });
      for await (const _ of r) {
        if (++chunks === 1) window.streaming = true;
        if (abort && chunks === 2) controller.abort();
      }
      return { chunks };
    } catch (e) {
      return { chunks, code: e.code, message: e.message };
    }
  };
}

/** Three pages of the context, each with the session helpers and the package. */
async function tabs(page, context, server, init = null) {
  await context.addInitScript(helpers);
  await context.addInitScript(longHelpers);
  if (init) await context.addInitScript(init);
  const pages = [page, await context.newPage(), await context.newPage()];
  for (const p of pages) await plainPage(p, server);
  return pages;
}

/** Each chat's replies in a Worker of its own (not shared): the references. */
let references = null;
async function referenceReplies(page) {
  references ??= await page.evaluate(
    async ({ prompts, followUps, later, request }) => {
      const { createWorker } = await import('/pkg/pocket.js');
      const w = createWorker();
      const m = await w.load('/models/tiny/', { backend: 'webgpu', cache: false });
      const out = [];
      for (let i = 0; i < prompts.length; i++) {
        const one = [say(prompts[i])];
        const a = await turn(m, one, request);
        const two = [...one, reply(a), say(followUps[i])];
        const b = await turn(m, two, request);
        const three = [...two, reply(b), say(later[0])];
        const c = await turn(m, three, request);
        const d = await turn(m, [...three, reply(c), say(later[1])], request);
        out.push([a, b, c, d].map((t) => t.content));
      }
      w.terminate();
      return out;
    },
    { prompts: PROMPTS, followUps: FOLLOW_UP, later: LATER, request: TURN },
  );
  return references;
}

/** Load the fixture shared in each page in turn: { info, ms } each. */
async function loadShared(pages) {
  const out = [];
  for (const p of pages) {
    out.push(
      await p.evaluate(async () => {
        window.hostChanges = [];
        window.lostEvents = [];
        const t0 = performance.now();
        window.model = await window.Pocket.load('/models/tiny/', {
          shared: true,
          backend: 'webgpu',
          onHostChange: (e) => window.hostChanges.push(e),
          onDeviceLost: (e) => window.lostEvents.push(e),
        });
        return { info: window.model.info, ms: performance.now() - t0 };
      }),
    );
  }
  return out;
}

/** Turn `n` (0 to 3) of page `i`'s chat, its history the replies so far; with when it
 * started and ended (ms since the epoch: one clock for every page). */
function turnOf(p, i, n, replies) {
  return p.evaluate(
    async ({ prompt, followUp, later, n, replies, request }) => {
      const history = [say(prompt)];
      if (n >= 1) history.push({ role: 'assistant', content: replies[0] }, say(followUp));
      for (let k = 2; k <= n; k++) history.push({ role: 'assistant', content: replies[k - 1] }, say(later[k - 2]));
      const start = Date.now();
      try {
        const t = await turn(window.model, history, request);
        return { ...t, start, end: Date.now() };
      } catch (e) {
        return { code: e.code, message: e.message, start, end: Date.now() };
      }
    },
    { prompt: PROMPTS[i], followUp: FOLLOW_UP[i], later: LATER, n, replies, request: TURN },
  );
}

/** Add reply `t` to a tab's replies `got`, and its history's length (cached by the next
 * turn: the reply's last token was chosen but never run through the model). */
function keep(got, t) {
  got.push(t.content);
  got.history = t.usage.prompt_tokens + t.usage.completion_tokens - 1;
}

/** Page `i`'s `turnOf` for every page at once; checks each reply against the reference
 * and that all three were in flight together. */
async function concurrentTurn(pages, indices, n, refs, got) {
  const out = await Promise.all(indices.map((i) => turnOf(pages[i], i, n, got[i])));
  out.forEach((t, k) => {
    const i = indices[k];
    assert.ok(!t.code, `tab ${i} turn ${n}: ${t.code} ${t.message}`);
    assert.equal(t.content, refs[i][n], `tab ${i} turn ${n} equals the chat alone in its own Worker`);
    if (n > 0) {
      // The history (the last turn's prompt and reply) is in the KV cache: this tab's
      // conversation was put back after the other tabs' requests ran.
      assert.equal(t.usage.prompt_tokens_details.cached_tokens, got[i].history,
        `tab ${i} turn ${n}: of ${t.usage.prompt_tokens} prompt tokens, the history's are cached`);
    }
    keep(got[i], t);
  });
  const together = Math.max(...out.map((t) => t.start)) < Math.min(...out.map((t) => t.end));
  assert.ok(together, `the tabs' requests were in flight at the same time: ${JSON.stringify(out.map((t) => [t.start, t.end]))}`);
  return out;
}

/** Bytes the page's JS (and its Workers) hold, measured at once (the flag in browser.js). */
function pageMemory(p) {
  return p.evaluate(async () => (await performance.measureUserAgentSpecificMemory()).bytes);
}

/** PSS bytes of every Chromium process (Linux's /proc): the whole browser's memory, for
 * the log (GC makes it move by megabytes either way, so nothing is asserted on it). */
function browserPss() {
  let kb = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('chromium')) continue;
      kb += Number(/Pss:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      // a process that ended meanwhile
    }
  }
  return kb * 1024;
}

const shardRequests = (server) => server.requests.filter((r) => /weights-\d+\.bin$/.test(r)).length;

/** Loads in three tabs: one host, the later loads fast, the shards fetched once. */
async function checkLoads(pages, server, fixture, via) {
  const shards = JSON.parse(fs.readFileSync(path.join(fixture, 'manifest.json'), 'utf8')).shards.length;
  server.requests.length = 0;
  const loads = await loadShared(pages.slice(0, 1));
  const [before, pssBefore] = [await pageMemory(pages[1]), browserPss()];
  loads.push(...(await loadShared(pages.slice(1, 2))));
  const [after, pssAfter] = [await pageMemory(pages[1]), browserPss()];
  loads.push(...(await loadShared(pages.slice(2))));
  const hosts = new Set(loads.map((l) => l.info.shared.host));
  assert.equal(hosts.size, 1, 'one engine for the three tabs');
  for (const l of loads) assert.equal(l.info.shared.via, via);
  assert.equal(shardRequests(server), shards, 'the weights are fetched once');
  for (const l of loads.slice(1)) assert.ok(l.ms < 200, `a later tab's load returns in < 200 ms: ${l.ms.toFixed(0)} ms`);
  const bytes = await Promise.all(pages.map((p) => p.evaluate(() => window.model.gpuBytes())));
  assert.ok(bytes[0] > 0 && bytes.every((b) => b === bytes[0]), `one engine's GPU bytes: ${bytes}`);
  const tabsSeen = await pages[0].evaluate(() => window.model.info.shared.tabs);
  assert.equal(tabsSeen, 3, 'the first tab sees three tabs');
  const here = await Promise.all(pages.map((p) => p.evaluate(() => window.model.info.shared.here)));
  assert.deepEqual(here, [via === 'leader', false, false], 'the leader is the first tab; a SharedWorker is no tab');
  const grew = (after - before) / 2 ** 20;
  assert.ok(grew < 5, `the second tab's memory grew ${grew.toFixed(2)} MB`);
  const mb = (x) => (x / 2 ** 20).toFixed(1);
  console.log(`     ${via}: loads ${loads.map((l) => `${l.ms.toFixed(0)} ms`).join(', ')}; ${bytes[0]} GPU bytes, once; ` +
    `the second tab's load: its page and Workers ${mb(before)} → ${mb(after)} MB, ` +
    `Chromium's processes (PSS) ${mb(pssBefore)} → ${mb(pssAfter)} MB`);
}

export const tests = {
  async an_aborted_shared_load_leaves_no_tab_behind({ page, server }) {
    await plainPage(page, server);
    const r = await page.evaluate(async () => {
      const controller = new AbortController();
      const options = { shared: true, backend: 'webgpu', signal: controller.signal };
      // Aborted while the engine loads (its first progress event).
      const code = await window.Pocket.load('/models/tiny/', { ...options, onProgress: () => controller.abort() })
        .then(() => 'loaded', (e) => e.code);
      const model = await window.Pocket.load('/models/tiny/', { shared: true, backend: 'webgpu' });
      return { code, tabs: model.info.shared.tabs, ids: await model.encode('Hello') };
    });
    assert.equal(r.code, 'ABORTED');
    assert.equal(r.tabs, 1, 'the aborted load left no tab attached');
    assert.ok(r.ids.length > 0, 'the engine answers the next load');
  },

  async three_tabs_share_one_engine_in_a_shared_worker({ page, context, server, fixture }) {
    const pages = await tabs(page, context, server);
    await checkLoads(pages, server, fixture, 'shared-worker');
    const refs = await referenceReplies(pages[0]);
    const got = [[], [], []];
    await concurrentTurn(pages, [0, 1, 2], 0, refs, got);
    await concurrentTurn(pages, [0, 1, 2], 1, refs, got);
    // The first page aborts a long reply while the second's waits behind it: only its own
    // request stops. Then it closes while streaming another: the engine is the
    // SharedWorker's, and the other two go on.
    const aborted = await Promise.all([
      pages[0].evaluate(() => longReply(true)),
      pages[0].waitForFunction(() => window.streaming === true).then(() => turnOf(pages[1], 1, 2, got[1])),
    ]);
    assert.equal(aborted[0].code, 'ABORTED', JSON.stringify(aborted[0]));
    assert.ok(!aborted[1].code && aborted[1].content === refs[1][2], `the other tab's request: ${JSON.stringify(aborted[1])}`);
    keep(got[1], aborted[1]);
    void pages[0].evaluate(() => longReply(false)).catch(() => {});
    await pages[0].waitForFunction(() => window.streaming === true);
    await pages[0].close();
    const [last] = await concurrentTurn(pages, [2], 2, refs, got);
    assert.ok(last.end - last.start < 3000, `the closed tab's request stopped: the next took ${last.end - last.start} ms`);
    assert.equal(await pages[1].evaluate(() => window.model.info.shared.tabs), 2);
    assert.deepEqual(await pages[1].evaluate(() => window.hostChanges), [], 'no takeover');
    // The device is lost: both tabs are told; one reload (the first tab's to ask) serves
    // both, and each conversation goes on.
    await pages[1].evaluate(() => window.model.destroyDeviceForTesting());
    for (const p of pages.slice(1)) await p.waitForFunction(() => window.lostEvents.length === 1);
    const reloads = [];
    for (const p of [pages[2], pages[1]]) {
      reloads.push(await p.evaluate(async () => {
        const t0 = performance.now();
        await window.model.reload();
        return performance.now() - t0;
      }));
    }
    await concurrentTurn(pages, [1, 2], 3, refs, got);
    console.log(`     a lost device: both tabs told; reloads ${reloads.map((ms) => `${ms.toFixed(0)} ms`).join(', then ')}`);
  },

  async without_shared_worker_a_leader_tab_hosts_and_another_takes_over({ page, context, server, fixture }) {
    // As on Android's Chrome: no SharedWorker, so the tabs elect a leader.
    const pages = await tabs(page, context, server, () => delete window.SharedWorker);
    await checkLoads(pages, server, fixture, 'leader');
    const refs = await referenceReplies(pages[0]);
    const got = [[], [], []];
    await concurrentTurn(pages, [0, 1, 2], 0, refs, got);
    const oldHost = await pages[1].evaluate(() => window.model.info.shared.host);
    // Tab 1 streams a long reply; tab 2's turn waits behind it; the hosting page closes.
    const long = pages[1].evaluate(() => longReply(false));
    await pages[1].waitForFunction(() => window.streaming === true);
    const waiting = turnOf(pages[2], 2, 1, got[2]);
    await pages[2].waitForTimeout(100);
    const closed = Date.now();
    await pages[0].close();
    const lost = await long;
    assert.equal(lost.code, 'HOST_LOST', `the streaming request fails with HOST_LOST: ${JSON.stringify(lost)}`);
    const retried = await waiting;
    assert.ok(!retried.code, `the waiting request is sent again to the new host: ${retried.code} ${retried.message}`);
    assert.equal(retried.content, refs[2][1], 'and answers as the chat alone does');
    const takeover = retried.end - closed;
    assert.equal(retried.usage.prompt_tokens_details.cached_tokens, got[2].history, 'its history restored on the new host');
    keep(got[2], retried);
    await concurrentTurn(pages, [1], 1, refs, got);
    await concurrentTurn(pages, [1, 2], 2, refs, got);
    for (const p of pages.slice(1)) {
      const { changes, info } = await p.evaluate(() => ({ changes: window.hostChanges, info: window.model.info.shared }));
      assert.equal(changes.length, 1, 'onHostChange told the tab once');
      assert.equal(changes[0].previous, oldHost);
      assert.notEqual(info.host, oldHost);
      assert.equal(info.via, 'leader');
    }
    const here = await Promise.all(pages.slice(1).map((p) => p.evaluate(() => window.model.info.shared.here)));
    assert.equal(here.filter(Boolean).length, 1, `one of the two tabs hosts now: ${here}`);
    console.log(`     HOST_LOST after ${lost.chunks} chunks; the waiting request answered ${takeover} ms after the host closed`);
  },
};
