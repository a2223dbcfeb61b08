// Browser tests of session snapshots (`model.sessions`, the `autoSave` / `restore` load
// options; web/src/sessions.js over src/web/snapshot.rs), run by run.js on the tiny
// fixture, on WebGPU and on the CPU backend. Each fresh page or Worker pays ~8 s of
// SwiftShader pipeline compiles on its first WebGPU request, so the default-tier claims
// share two WebGPU contexts (a Worker, then the reloaded page):
// - a chat saved, the page reloaded (its Worker killed), restored: the next reply equals
//   the uninterrupted session's token for token (greedy and seeded), with the history in
//   the KV cache (`cached_tokens` == the restored tokens: no prefill); an `autoSave`d
//   chat goes on from its messages the same way; another backend's snapshot is
//   prefilled, saying why; a Worker killed and recreated with `restore` + `autoSave`
//   goes on with no prefill and appends;
// - every bad snapshot (truncated, a corrupt byte, another model, another version or
//   tokenizer) is a typed error, and `fallback` restores what can be;
// - without OPFS, snapshots live in Cache Storage (CPU backend);
// - long tier: restore vs re-prefill of a ~4,000-token conversation (≥ 10×), bytes per
//   position, save time per reply.
// Each gets { page, context, server, fixture, scratch, results }.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { plainPage } from './cases.js';

const BACKENDS = ['webgpu', 'cpu'];

/** Page helpers (an init script): `turn(model, messages, request)` runs a chat request
 * (greedy, logprobs, 6 tokens unless `request` says otherwise; streamed with
 * `stream: true`) and gives { content, tokens: [[token, logprob]], usage, finish }. The
 * fixture's random weights favour its special tokens and stray bytes, which a reply's
 * text does not render back (so the next request would re-run the reply's end whether
 * restored or not): a logit bias of +100 keeps replies to lower-case letters and spaces,
 * so `cached_tokens` of the next turn is the whole history. */
export function helpers() {
  const letters = { 32: 100 };
  for (let c = 97; c <= 122; c++) letters[c] = 100;
  window.turn = async (model, messages, request = {}) => {
    const req = { messages, max_tokens: 6, temperature: 0, logprobs: true, logit_bias: letters, ...request };
    if (req.stream) req.stream_options = { include_usage: true };
    const r = await model.chat.completions.create(req);
    if (!req.stream) {
      const c = r.choices[0];
      const tokens = (c.logprobs?.content ?? []).map((t) => [t.token, t.logprob]);
      return { content: c.message.content, tokens, usage: r.usage, finish: c.finish_reason };
    }
    const out = { content: '', tokens: [], usage: null, finish: null };
    for await (const chunk of r) {
      const c = chunk.choices[0];
      out.content += c?.delta?.content ?? '';
      out.tokens.push(...(c?.logprobs?.content ?? []).map((t) => [t.token, t.logprob]));
      out.finish = c?.finish_reason ?? out.finish;
      out.usage = chunk.usage ?? out.usage;
    }
    return out;
  };
  window.say = (content) => ({ role: 'user', content });
  window.badSnapshots = badSnapshots;
  window.reply = (t) => ({ role: 'assistant', content: t.content });
  // Every bad snapshot on model `m` (of `backend`): two saves, the file exported and
  // damaged five ways, each imported and restored plainly and with `fallback`; the
  // `restore` load option on a corrupt one; an empty id.
  async function badSnapshots(m, backend) {
    const crc32 = (bytes) => {
      let c = ~0;
      for (const b of bytes) {
        c ^= b;
        for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
      }
      return ~c >>> 0;
    };
    // The snapshot with its header JSON edited (its checksum redone).
    const withHeader = (bytes, edit) => {
      const len = new DataView(bytes.buffer).getUint32(12, true);
      const json = JSON.parse(new TextDecoder().decode(bytes.subarray(16, 16 + len)));
      edit(json);
      const text = new TextEncoder().encode(JSON.stringify(json));
      const out = new Uint8Array(bytes.length - len + text.length);
      out.set(bytes.subarray(0, 12));
      out.set(text, 16);
      out.set(bytes.subarray(20 + len), 20 + text.length);
      const view = new DataView(out.buffer);
      view.setUint32(12, text.length, true);
      view.setUint32(16 + text.length, crc32(text), true);
      return out;
    };
    const u1 = window.say('Hello, pocket!');
    const a1 = await window.turn(m, [u1]);
    const first = await m.sessions.save('good');
    const chat = [u1, window.reply(a1), window.say('More.')];
    await window.turn(m, chat);
    await m.sessions.save('good');
    const good = await m.sessions.export('good');
    // The first record's rows: after the header, its tag and length, start and count,
    // its tokens and their checksum.
    const rowsAt = 20 + new DataView(good.buffer).getUint32(12, true) + 12 + 8 + 4 * first.tokens + 4;
    const corrupt = good.slice();
    corrupt[rowsAt + 5] ^= 0x5a;
    const version = good.slice();
    new DataView(version.buffer).setUint32(8, 2, true);
    const cases = {
      truncated: good.slice(0, first.bytes + 40), // inside the second save's record
      corrupt,
      model: withHeader(good, (h) => (h.model = 'ab'.repeat(32))),
      version,
      tokenizer: withHeader(good, (h) => (h.tokenizer = 'cd'.repeat(32))),
    };
    const res = {};
    for (const [name, bytes] of Object.entries(cases)) {
      await m.sessions.import(name, bytes);
      const plain = await window.failure(m.sessions.restore(name));
      let fallback;
      try {
        const f = await m.sessions.restore(name, { fallback: true });
        const next = await window.turn(m, f.messages.concat([window.say('Again.')]), { max_tokens: 2 });
        fallback = { ...f, cached: next.usage.prompt_tokens_details?.cached_tokens };
      } catch (e) {
        fallback = { code: e.code, message: e.message };
      }
      res[name] = { plain, fallback };
    }
    const opts = { backend, cache: false };
    const load = await window.failure(window.Pocket.load('/models/tiny/', { ...opts, restore: 'corrupt' }));
    const again = await window.Pocket.load('/models/tiny/', { ...opts, restore: { id: 'corrupt', fallback: true } });
    const loadFallback = again.restored;
    again.unload();
    const badId = await window.failure(m.sessions.save(''));
    return { first, res, chat, load, loadFallback, badId };
  }
  // 70 saves of one snapshot (each after the first a part file of its own in OPFS; past
  // 64 parts one is written whole again), then its files and a restore.
  async function manySaves(m) {
    const reports = [];
    for (let i = 0; i < 70; i++) {
      if (i % 10 === 9) await window.turn(m, [window.say(`Turn ${i}.`)], { max_tokens: 2 });
      reports.push(await m.sessions.save('many'));
    }
    const root = await (await navigator.storage.getDirectory()).getDirectoryHandle('pocketrt-sessions');
    const files = [];
    for await (const [, dir] of root.entries()) {
      for await (const name of dir.keys()) if (name.startsWith('many.snap')) files.push(name);
    }
    const back = await m.sessions.restore('many');
    const last = reports.at(-1);
    return { files: files.length, rewrote: reports.filter((r) => r.rewrote).length, last, back };
  }
  window.manySaves = manySaves;
  // A failure as { code, message } (to assert on in node).
  window.failure = async (p) => {
    try {
      await p;
      return { code: 'none' };
    } catch (e) {
      return { code: e.code, message: e.message };
    }
  };
}

/** The claims about `badSnapshots`' outcomes on `backend`. */
function checkBadSnapshots(backend, bad) {
  const { res, first, chat } = bad;
  const is = (got, code, re, what) => {
    assert.equal(got.code, code, `${backend} ${what}: ${JSON.stringify(got)}`);
    assert.match(got.message, re, `${backend} ${what}`);
  };
  is(res.truncated.plain, 'SESSION_CORRUPT', /truncated/, 'truncated');
  const t = res.truncated.fallback;
  assert.ok(t.dropped, `${backend}: ${JSON.stringify(t)}`);
  assert.equal(t.tokens, first.tokens, 'a save cut short: the save before it comes back');
  assert.equal(t.prefilled, null, 'with its rows');
  assert.deepEqual(t.messages, chat.slice(0, 2));
  assert.equal(t.cached, t.tokens);
  is(res.corrupt.plain, 'SESSION_CORRUPT', /checksum/, 'a corrupt byte');
  assert.match(res.corrupt.fallback.prefilled ?? '', /checksum/, 'a corrupt row: its tokens prefilled');
  is(res.model.plain, 'SESSION_MISMATCH', /another model/, 'another model');
  assert.match(res.model.fallback.prefilled ?? '', /another model/);
  for (const name of ['corrupt', 'model']) {
    const f = res[name].fallback;
    assert.equal(f.restored, 0);
    assert.equal(f.cached, f.tokens, `${backend} ${name}: the prefilled history is in the cache`);
    assert.equal(f.messages.length, 4);
  }
  is(res.version.plain, 'SESSION_MISMATCH', /version 2/, 'another version');
  is(res.version.fallback, 'SESSION_MISMATCH', /version 2/, 'another version, even with fallback');
  is(res.tokenizer.plain, 'SESSION_MISMATCH', /another tokenizer/, 'another tokenizer');
  is(res.tokenizer.fallback, 'SESSION_MISMATCH', /another tokenizer/, 'another tokenizer, even with fallback');
  is(bad.load, 'SESSION_CORRUPT', /checksum/, 'Pocket.load with restore of a corrupt snapshot');
  assert.match(bad.loadFallback.prefilled ?? '', /checksum/, 'and with fallback');
  is(bad.badId, 'INVALID_ARGUMENT', /session id/, 'an empty id');
}

async function sessionPage(page, context, server) {
  await context.addInitScript(helpers);
  await plainPage(page, server);
}

const cached = (t) => t.usage.prompt_tokens_details?.cached_tokens;

/** A copy of the tiny fixture whose manifest says the model takes `positions`
 * positions (its weights, shards and tokenizer the same), served as models/NAME. */
function longCopy(server, fixture, scratch, name, positions) {
  const dir = path.join(scratch, name);
  if (!fs.existsSync(dir)) {
    fs.mkdirSync(dir);
    for (const f of fs.readdirSync(fixture)) {
      if (f !== 'manifest.json') fs.symlinkSync(path.join(fixture, f), path.join(dir, f));
    }
    const m = JSON.parse(fs.readFileSync(path.join(fixture, 'manifest.json'), 'utf8'));
    m.config.max_context = positions;
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m));
  }
  server.models[name] = dir;
  return `/models/${name}/`;
}

export const tests = {
  async session_snapshots_survive_a_reload_and_a_killed_worker({ page, context, server }) {
    await sessionPage(page, context, server);
    // Before the reload: on WebGPU in a Worker and on the CPU backend in the page, a
    // turn (streamed, autoSaved), an explicit save, then the next turn greedy and seeded
    // (the uninterrupted session's replies; autoSaved too: appends). And a CPU Worker
    // killed mid-conversation, then recreated with `restore` + `autoSave`.
    const before = await page.evaluate(async () => {
      const { createWorker } = await import('/pkg/pocket.js');
      const out = {};
      const workers = [];
      for (const backend of ['webgpu', 'cpu']) {
        const saves = [];
        const options = {
          backend,
          cache: false,
          autoSave: `auto-${backend}`,
          onAutoSave: (e) => saves.push(e.report ?? { error: e.error.message }),
        };
        let m;
        if (backend === 'webgpu') {
          workers.push(createWorker('/pkg/worker.js'));
          m = await workers[0].load('/models/tiny/', options);
        } else {
          m = await window.Pocket.load('/models/tiny/', options);
        }
        const u1 = window.say('Hello, pocket!');
        const a1 = await window.turn(m, [u1], { stream: true });
        const saved = await m.sessions.save(`cmp-${backend}`);
        const next = [u1, window.reply(a1), window.say('And then?')];
        const greedy = await window.turn(m, next, { max_tokens: 8 });
        const seeded = await window.turn(m, next, { max_tokens: 8, temperature: 1, seed: 7 });
        out[backend] = { saved, next, greedy, seeded, saves, backend: m.info.backend };
      }
      // A CPU Worker killed after two turns, and its chat in a new one.
      const w = createWorker('/pkg/worker.js');
      const m = await w.load('/models/tiny/', { backend: 'cpu', cache: false, autoSave: 'worker' });
      const u1 = window.say('Hi!');
      const a1 = await window.turn(m, [u1], { stream: true });
      const chat = [u1, window.reply(a1), window.say('More.')];
      const a2 = await window.turn(m, chat);
      w.terminate();
      const events = [];
      const w2 = createWorker('/pkg/worker.js');
      const m2 = await w2.load('/models/tiny/', {
        backend: 'cpu',
        cache: false,
        restore: 'worker',
        autoSave: 'worker',
        onAutoSave: (e) => events.push(e.report ?? { error: e.error.message }),
      });
      const a3 = await window.turn(m2, m2.restored.messages.concat([window.say('Go on.')]), { max_tokens: 3 });
      out.worker = { chat: chat.concat([window.reply(a2)]), restored: m2.restored, a3, events, threads: m2.threads };
      w2.terminate();
      workers[0].terminate(); // the WebGPU Worker: killed mid-conversation too
      return out;
    });
    await page.reload();
    await page.waitForFunction(() => document.getElementById('status').textContent !== 'loading');
    // After: each backend in the page restores the explicit save, then the autoSaved
    // chat, then the other backend's snapshot; then every bad snapshot.
    const after = await page.evaluate(async () => {
      const out = {};
      for (const backend of ['webgpu', 'cpu']) {
        const m = await window.Pocket.load('/models/tiny/', { backend, cache: false, restore: `cmp-${backend}` });
        const restored = m.restored;
        const next = restored.messages.concat([window.say('And then?')]);
        const greedy = await window.turn(m, next, { max_tokens: 8 });
        const seeded = await window.turn(m, next, { max_tokens: 8, temperature: 1, seed: 7 });
        const auto = await m.sessions.restore(`auto-${backend}`);
        const third = await window.turn(m, auto.messages.concat([window.say('Go on.')]), { max_tokens: 3 });
        const other = backend === 'cpu' ? 'webgpu' : 'cpu';
        const foreign = await m.sessions.restore(`cmp-${other}`);
        const fourth = await window.turn(m, foreign.messages.concat([window.say('And then?')]), { max_tokens: 2 });
        const bad = await window.badSnapshots(m, backend);
        const many = backend === 'cpu' ? await window.manySaves(m) : null;
        const list = await m.sessions.list();
        const missing = await window.failure(m.sessions.restore('never-saved'));
        m.unload();
        out[backend] = { restored, greedy, seeded, auto, third, foreign, fourth, bad, many, list, missing };
      }
      const none = await window.Pocket.load('/models/tiny/', { backend: 'cpu', cache: false, restore: 'never-saved' });
      out.noneRestored = none.restored;
      none.unload();
      out.usage = await window.Pocket.cache.usage();
      await window.Pocket.cache.delete('/models/tiny/');
      out.gone = await window.Pocket.cache.usage();
      return out;
    });
    for (const backend of BACKENDS) {
      const b = before[backend];
      const a = after[backend];
      assert.equal(b.backend, backend);
      assert.deepEqual(b.saves.map((s) => s.error ?? 'ok'), ['ok', 'ok', 'ok'], `${backend}: an autoSave after every reply`);
      assert.equal(b.saves[0].rewrote, true, 'the first autoSave writes the file');
      for (const s of b.saves.slice(1)) {
        assert.ok(!s.rewrote && s.positions < s.tokens, `${backend}: later autoSaves append: ${JSON.stringify(s)}`);
      }
      const r = a.restored;
      assert.equal(r.prefilled, null, `${backend}: the rows are restored, not prefilled: ${r.prefilled}`);
      assert.equal(r.tokens, b.saved.tokens);
      assert.equal(r.restored, r.tokens);
      assert.deepEqual(r.messages, b.next.slice(0, 2), `${backend}: the saved chat comes back`);
      assert.equal(cached(a.greedy), r.tokens, `${backend}: the history is in the KV cache (no prefill)`);
      assert.deepEqual(a.greedy, b.greedy, `${backend}: the greedy reply after a reload equals the uninterrupted one`);
      assert.deepEqual(a.seeded, b.seeded, `${backend}: the seeded reply too`);
      assert.ok(b.greedy.tokens.length > 0 && b.seeded.tokens.length > 0);
      // The autoSaved chat: the last request's messages and its reply.
      assert.deepEqual(a.auto.messages, b.next.concat([replyMessage(b.seeded)]), `${backend}: autoSave kept the chat`);
      assert.equal(a.auto.prefilled, null);
      assert.equal(cached(a.third), a.auto.tokens, `${backend}: the autoSaved chat goes on with no prefill`);
      // Another backend's rows are prefilled, and the restore says why.
      assert.match(a.foreign.prefilled ?? '', /KV rows were written by (gpu|cpu)\//, a.foreign.prefilled);
      assert.equal(a.foreign.restored, 0);
      assert.equal(cached(a.fourth), a.foreign.tokens, `${backend}: a prefilled history is in the cache`);
      checkBadSnapshots(backend, a.bad);
      if (a.many) {
        assert.equal(a.many.rewrote, 1, 'one snapshot file, appended 69 times');
        assert.ok(a.many.files >= 2 && a.many.files <= 10, `past 64 parts it was written whole again: ${a.many.files} files`);
        assert.equal(a.many.back.bytes, a.many.last.bytes);
        assert.equal(a.many.back.tokens, a.many.last.tokens);
        assert.equal(a.many.back.prefilled, null);
      }
      const ids = a.list.map((s) => s.id).sort();
      assert.ok(['auto-cpu', 'auto-webgpu', 'cmp-cpu', 'cmp-webgpu', 'worker'].every((id) => ids.includes(id)), ids.join());
      assert.ok(a.list.every((s) => s.bytes > 0 && s.savedAt > 0), JSON.stringify(a.list));
      assert.equal(a.missing.code, 'SESSION_NOT_FOUND', a.missing.message);
      console.log(`     ${backend}: restored ${r.tokens} tokens (${r.bytes} B) in ${(r.seconds * 1000).toFixed(1)} ms; ` +
        `autoSaves ${b.saves.map((s) => `${s.positions} positions ${s.bytesWritten} B ${(s.seconds * 1000).toFixed(1)} ms`).join(', ')}`);
    }
    const w = before.worker;
    assert.equal(w.restored.prefilled, null, w.restored.prefilled);
    assert.deepEqual(w.restored.messages, w.chat, 'the killed Worker\'s chat comes back');
    assert.equal(cached(w.a3), w.restored.tokens, 'the recreated Worker prefills nothing of the history');
    assert.equal(w.events.length, 1);
    assert.equal(w.events[0].rewrote, false, `the restored file takes the next append: ${JSON.stringify(w.events[0])}`);
    console.log(`     CPU Worker (${w.threads} thread(s)) killed and recreated: restored ${w.restored.tokens} tokens in ` +
      `${(w.restored.seconds * 1000).toFixed(1)} ms; the next reply appended ${w.events[0].bytesWritten} B`);
    assert.equal(after.noneRestored, null, 'restore of an id never saved: a fresh model');
    assert.ok(after.usage.sessions > 0, 'snapshots count in Pocket.cache.usage()');
    assert.equal(after.gone.sessions, 0, 'Pocket.cache.delete removes the model\'s snapshots');
  },

  async session_snapshots_live_in_cache_storage_without_opfs({ page, context, server }) {
    await context.addInitScript(() => {
      delete StorageManager.prototype.getDirectory;
    });
    await sessionPage(page, context, server);
    const r = await page.evaluate(async () => {
      const saves = [];
      const opts = { backend: 'cpu', cache: false };
      const m = await window.Pocket.load('/models/tiny/', { ...opts, autoSave: 'c', onAutoSave: (e) => saves.push(e.report) });
      const u1 = window.say('Hello, pocket!');
      const a1 = await window.turn(m, [u1]);
      const next = [u1, window.reply(a1), window.say('And then?')];
      const a2 = await window.turn(m, next);
      const want = await window.turn(m, next.concat([window.reply(a2), window.say('Go on.')]));
      m.unload();
      const back = await window.Pocket.load('/models/tiny/', { ...opts, restore: 'c' });
      const restored = back.restored;
      const got = await window.turn(back, restored.messages.slice(0, 4).concat([window.say('Go on.')]));
      const list = await back.sessions.list();
      const keys = (await (await caches.open('pocketrt-sessions-v1')).keys()).length;
      const usage = await window.Pocket.cache.usage();
      back.unload();
      await window.Pocket.cache.delete('/models/tiny/');
      const left = (await (await caches.open('pocketrt-sessions-v1')).keys()).length;
      return { opfs: typeof navigator.storage.getDirectory, saves, restored, want, got, list, keys, usage, left };
    });
    assert.equal(r.opfs, 'undefined', 'OPFS is hidden in this test');
    assert.deepEqual(r.saves.map((s) => s.rewrote), [true, false, false], 'appends, as whole files in Cache Storage');
    assert.equal(r.restored.prefilled, null);
    assert.equal(r.restored.tokens, r.saves[2].tokens);
    assert.deepEqual(r.got.tokens, r.want.tokens, 'the restored chat goes on as the uninterrupted one');
    assert.deepEqual(r.list.map((s) => [s.id, s.tokens, s.bytes]), [['c', r.saves[2].tokens, r.saves[2].bytes]]);
    assert.equal(r.keys, 1);
    assert.equal(r.usage.sessions, r.saves[2].bytes);
    assert.equal(r.left, 0, 'Pocket.cache.delete removes them');
  },

  // Long tier: a ~4,000-token conversation restored vs prefilled again, on both backends;
  // bytes per position and the save time per reply.
  async long_session_restore_is_10x_faster_than_a_prefill_of_4000_tokens({ page, context, server, fixture, scratch }) {
    const url = longCopy(server, fixture, scratch, 'tinylong', 8192);
    await sessionPage(page, context, server);
    const figures = {};
    for (const backend of BACKENDS) {
      const r = await page.evaluate(async ({ url, backend }) => {
        const opts = { backend, cache: false, contextLength: 4608 };
        const saves = [];
        const m = await window.Pocket.load(url, { ...opts, autoSave: 'long', onAutoSave: (e) => saves.push(e.report ?? { error: e.error.message }) });
        // ~3,950 byte-level tokens of text, then short turns.
        const words = 'the quick brown fox jumps over a lazy dog while pocket models chat '.repeat(60);
        let chat = [window.say(words.slice(0, 3950))];
        for (const q of ['', 'Go on.', 'And then?', 'Why?']) {
          if (q) chat.push(window.say(q));
          const a = await window.turn(m, chat, { max_tokens: 8, logprobs: false });
          chat.push(window.reply(a));
        }
        m.unload();
        const next = chat.concat([window.say('Summarize.')]);
        // Restore on a fresh model vs a fresh model prefilling the same conversation.
        const fresh = await window.Pocket.load(url, opts);
        const t0 = performance.now();
        const restored = await fresh.sessions.restore('long');
        const restoreMs = performance.now() - t0;
        const t1 = performance.now();
        const afterRestore = await window.turn(fresh, next, { max_tokens: 1, logprobs: false });
        const firstReplyMs = performance.now() - t1;
        fresh.unload();
        const cold = await window.Pocket.load(url, opts);
        const t2 = performance.now();
        const prefilled = await window.turn(cold, next, { max_tokens: 1, logprobs: false });
        const prefillMs = performance.now() - t2;
        cold.unload();
        return { saves, restored, restoreMs, afterRestore, firstReplyMs, prefilled, prefillMs };
      }, { url, backend });
      assert.ok(r.saves.every((s) => !s.error), JSON.stringify(r.saves));
      assert.equal(r.restored.prefilled, null);
      assert.equal(cached(r.afterRestore), r.restored.tokens);
      assert.equal(cached(r.prefilled), 0);
      assert.ok(r.restored.tokens >= 3900, `a ~4,000-token conversation: ${r.restored.tokens}`);
      const f = {
        backend,
        tokens: r.restored.tokens,
        snapshotBytes: r.restored.bytes,
        bytesPerPosition: +(r.restored.bytes / r.restored.tokens).toFixed(1),
        restoreMs: +r.restoreMs.toFixed(1),
        prefillMs: +r.prefillMs.toFixed(1),
        ratio: +(r.prefillMs / r.restoreMs).toFixed(1),
        restorePlusFirstReplyMs: +(r.restoreMs + r.firstReplyMs).toFixed(1),
        firstSave: { ms: +(r.saves[0].seconds * 1000).toFixed(1), bytes: r.saves[0].bytesWritten },
        savePerReplyMs: r.saves.slice(1).map((s) => +(s.seconds * 1000).toFixed(1)),
        appendBytesPerReply: r.saves.slice(1).map((s) => s.bytesWritten),
      };
      figures[backend] = f;
      console.log(`     ${JSON.stringify(f)}`);
    }
    for (const f of Object.values(figures)) {
      assert.ok(f.ratio >= 10, `${f.backend}: restore ${f.restoreMs} ms vs prefill ${f.prefillMs} ms: ${f.ratio}× < 10×`);
    }
  },
};

/** The chat message of a reply (as `window.reply` makes it in the page). */
function replyMessage(t) {
  return { role: 'assistant', content: t.content };
}
