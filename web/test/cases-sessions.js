// Browser tests of session snapshots (`model.sessions`, the `autoSave` / `restore` load
// options; web/src/sessions.js over src/web/snapshot.rs), run by run.js on the tiny
// fixture, on WebGPU and on the CPU backend:
// - a chat saved, the page reloaded, restored: the next reply equals the uninterrupted
//   session's token for token (greedy and seeded), with the history in the KV cache
//   (`cached_tokens` == the restored tokens: no prefill); an `autoSave`d chat goes on
//   from its messages the same way; another backend's snapshot is prefilled, saying why;
// - the same across a Worker killed and recreated (`restore` + `autoSave` load options,
//   the appends of a sync access handle);
// - every bad snapshot (truncated, a corrupt byte, another model, another version or
//   tokenizer) is a typed error, and `fallback` restores what can be (on Cache Storage:
//   OPFS hidden);
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
 * `stream: true`) and gives { content, tokens: [[token, logprob]], usage, finish }. */
function helpers() {
  window.turn = async (model, messages, request = {}) => {
    const req = { messages, max_tokens: 6, temperature: 0, logprobs: true, ...request };
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
  window.reply = (t) => ({ role: 'assistant', content: t.content });
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
  async session_snapshots_continue_a_chat_after_a_page_reload({ page, context, server }) {
    await sessionPage(page, context, server);
    // Before the reload: a turn (streamed, autoSaved), an explicit save, then the next
    // turn greedy and seeded (the uninterrupted session's replies; autoSaved too).
    const before = await page.evaluate(async (backends) => {
      const out = {};
      for (const backend of backends) {
        const saves = [];
        const m = await window.Pocket.load('/models/tiny/', {
          backend,
          cache: false,
          autoSave: `auto-${backend}`,
          onAutoSave: (e) => saves.push(e.report ?? { error: e.error.message }),
        });
        const u1 = window.say('Hello, pocket!');
        const a1 = await window.turn(m, [u1], { stream: true });
        const saved = await m.sessions.save(`cmp-${backend}`);
        const next = [u1, window.reply(a1), window.say('And then?')];
        const greedy = await window.turn(m, next, { max_tokens: 8 });
        const seeded = await window.turn(m, next, { max_tokens: 8, temperature: 1, seed: 7 });
        m.unload();
        out[backend] = { a1, saved, next, greedy, seeded, saves, backendName: m.info.backend };
      }
      return out;
    }, BACKENDS);
    await page.reload();
    await page.waitForFunction(() => document.getElementById('status').textContent !== 'loading');
    const after = await page.evaluate(async (backends) => {
      const out = {};
      for (const backend of backends) {
        const m = await window.Pocket.load('/models/tiny/', { backend, cache: false, restore: `cmp-${backend}` });
        const restored = m.restored;
        const next = restored.messages.concat([window.say('And then?')]);
        const greedy = await window.turn(m, next, { max_tokens: 8 });
        const seeded = await window.turn(m, next, { max_tokens: 8, temperature: 1, seed: 7 });
        // The autoSaved chat: its messages, then a turn on them.
        const auto = await m.sessions.restore(`auto-${backend}`);
        const third = await window.turn(m, auto.messages.concat([window.say('Go on.')]), { max_tokens: 3 });
        // Another backend's snapshot: its tokens prefilled, and why.
        const other = backends.find((b) => b !== backend);
        const foreign = await m.sessions.restore(`cmp-${other}`);
        const fourth = await window.turn(m, foreign.messages.concat([window.say('And then?')]), { max_tokens: 2 });
        const list = await m.sessions.list();
        const missing = await window.failure(m.sessions.restore('never-saved'));
        m.unload();
        out[backend] = { restored, greedy, seeded, auto, third, foreign, fourth, list, missing };
      }
      const none = await window.Pocket.load('/models/tiny/', { backend: 'cpu', cache: false, restore: 'never-saved' });
      out.noneRestored = none.restored;
      none.unload();
      const usage = await window.Pocket.cache.usage();
      await window.Pocket.cache.delete('/models/tiny/');
      const gone = await window.Pocket.cache.usage();
      return { ...out, usage, gone };
    }, BACKENDS);
    for (const backend of BACKENDS) {
      const b = before[backend];
      const a = after[backend];
      assert.equal(b.backendName, backend);
      assert.deepEqual(b.saves.map((s) => s.error ?? 'ok'), ['ok', 'ok', 'ok'], `${backend}: an autoSave after every reply`);
      assert.equal(b.saves[0].rewrote, true, 'the first autoSave writes the file');
      assert.ok(b.saves.slice(1).every((s) => !s.rewrote && s.positions < s.tokens), `${backend}: later autoSaves append: ${JSON.stringify(b.saves)}`);
      const r = a.restored;
      assert.equal(r.prefilled, null, `${backend}: the rows are restored, not prefilled: ${r.prefilled}`);
      assert.equal(r.tokens, b.saved.tokens);
      assert.equal(r.restored, r.tokens);
      assert.deepEqual(r.messages, b.next.slice(0, 2), `${backend}: the saved chat comes back`);
      assert.equal(cached(a.greedy), r.tokens, `${backend}: the history is in the KV cache (no prefill)`);
      assert.deepEqual(a.greedy, b.greedy, `${backend}: the greedy reply after a restore equals the uninterrupted one`);
      assert.deepEqual(a.seeded.tokens, b.seeded.tokens, `${backend}: the seeded reply too`);
      assert.ok(b.greedy.tokens.length > 0 && b.seeded.tokens.length > 0);
      // The autoSaved chat: the last request's messages and its reply.
      assert.deepEqual(a.auto.messages, b.next.concat([window_reply(b.seeded)]), `${backend}: autoSave kept the chat`);
      assert.equal(a.auto.prefilled, null);
      assert.equal(cached(a.third), a.auto.tokens, `${backend}: the autoSaved chat goes on with no prefill`);
      // Another backend's rows are prefilled, and the restore says why.
      assert.match(a.foreign.prefilled ?? '', /KV rows were written by (gpu|cpu)\//, a.foreign.prefilled);
      assert.equal(a.foreign.restored, 0);
      assert.equal(cached(a.fourth), a.foreign.tokens, `${backend}: a prefilled history is in the cache`);
      const ids = a.list.map((s) => s.id).sort();
      assert.deepEqual(ids, ['auto-cpu', 'auto-webgpu', 'cmp-cpu', 'cmp-webgpu']);
      assert.ok(a.list.every((s) => s.bytes > 0 && s.savedAt > 0 && s.tokens > 0), JSON.stringify(a.list));
      assert.equal(a.missing.code, 'SESSION_NOT_FOUND', a.missing.message);
      console.log(`     ${backend}: restored ${r.tokens} tokens (${r.bytes} B) in ${(r.seconds * 1000).toFixed(1)} ms; ` +
        `autoSaves ${b.saves.map((s) => `${s.positions} positions ${s.bytesWritten} B ${(s.seconds * 1000).toFixed(1)} ms`).join(', ')}`);
    }
    assert.equal(after.noneRestored, null, 'restore of an id never saved: a fresh model');
    assert.ok(after.usage.sessions > 0, 'snapshots count in Pocket.cache.usage()');
    assert.equal(after.gone.sessions, 0, 'Pocket.cache.delete removes the model\'s snapshots');
  },

  async session_snapshots_survive_a_killed_worker({ page, context, server }) {
    await sessionPage(page, context, server);
    const r = await page.evaluate(async (backends) => {
      const { createWorker } = await import('/pkg/pocket.js');
      const out = {};
      for (const backend of backends) {
        const id = `worker-${backend}`;
        const w = createWorker('/pkg/worker.js');
        const m = await w.load('/models/tiny/', { backend, cache: false, autoSave: id });
        const u1 = window.say('Hello, pocket!');
        const a1 = await window.turn(m, [u1], { stream: true });
        const chat = [u1, window.reply(a1), window.say('And then?')];
        const a2 = await window.turn(m, chat);
        w.terminate(); // killed mid-conversation: nothing else is saved
        const events = [];
        const w2 = createWorker('/pkg/worker.js');
        const m2 = await w2.load('/models/tiny/', { backend, cache: false, restore: id, autoSave: id, onAutoSave: (e) => events.push(e) });
        const restored = m2.restored;
        const a3 = await window.turn(m2, restored.messages.concat([window.say('Go on.')]), { max_tokens: 3 });
        const list = await m2.sessions.list();
        w2.terminate();
        out[backend] = { chat, a2, restored, a3, events: events.map((e) => e.report ?? { error: e.error.message }), list, threads: m2.threads };
      }
      return out;
    }, BACKENDS);
    for (const backend of BACKENDS) {
      const b = r[backend];
      assert.equal(b.restored.prefilled, null, `${backend}: ${b.restored.prefilled}`);
      assert.deepEqual(b.restored.messages, b.chat.concat([window_reply(b.a2)]), `${backend}: the chat comes back`);
      assert.equal(cached(b.a3), b.restored.tokens, `${backend}: the next turn prefills nothing of the history`);
      assert.equal(b.events.length, 1);
      assert.equal(b.events[0].rewrote, false, `${backend}: the restored file takes the next save's append: ${JSON.stringify(b.events[0])}`);
      const saved = b.list.find((s) => s.id === `worker-${backend}`);
      assert.equal(saved?.tokens, b.events[0].tokens);
      console.log(`     ${backend} worker (${b.threads} thread(s)): restored ${b.restored.tokens} tokens in ` +
        `${(b.restored.seconds * 1000).toFixed(1)} ms; the next reply appended ${b.events[0].bytesWritten} B`);
    }
  },

  async bad_session_snapshots_are_typed_errors_and_fallback_restores_what_it_can({ page, context, server }) {
    // OPFS hidden: the snapshots go to Cache Storage (the browsers without it).
    await context.addInitScript(() => {
      delete StorageManager.prototype.getDirectory;
    });
    await sessionPage(page, context, server);
    const r = await page.evaluate(async (backends) => {
      const crc32 = (bytes) => {
        let c = ~0;
        for (const b of bytes) {
          c ^= b;
          for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
        }
        return ~c >>> 0;
      };
      /** The snapshot with its header JSON edited by `edit` (checksum redone). */
      const withHeader = (bytes, edit) => {
        const view = new DataView(bytes.buffer, bytes.byteOffset);
        const len = view.getUint32(12, true);
        const json = JSON.parse(new TextDecoder().decode(bytes.subarray(16, 16 + len)));
        edit(json);
        const text = new TextEncoder().encode(JSON.stringify(json));
        const out = new Uint8Array(bytes.length - len + text.length);
        out.set(bytes.subarray(0, 12));
        new DataView(out.buffer).setUint32(12, text.length, true);
        out.set(text, 16);
        new DataView(out.buffer).setUint32(16 + text.length, crc32(text), true);
        out.set(bytes.subarray(20 + len), 20 + text.length);
        return out;
      };
      const out = { opfs: typeof navigator.storage.getDirectory };
      for (const backend of backends) {
        const m = await window.Pocket.load('/models/tiny/', { backend, cache: false });
        const u1 = window.say('Hello, pocket!');
        const a1 = await window.turn(m, [u1]);
        const first = await m.sessions.save('good');
        const chat = [u1, window.reply(a1), window.say('More.')];
        await window.turn(m, chat);
        await m.sessions.save('good');
        const good = await m.sessions.export('good');
        const rowsAt = 20 + new DataView(good.buffer).getUint32(12, true) + 12 + 8 + 4 * first.tokens + 4;
        const corrupt = good.slice();
        corrupt[rowsAt + 5] ^= 0x5a;
        const version = good.slice();
        new DataView(version.buffer).setUint32(8, 2, true);
        const cases = {
          // Cut inside the second save's record: the first save is whole.
          truncated: good.slice(0, first.bytes + 40),
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
            fallback = { ...f, cached: cached(next) };
          } catch (e) {
            fallback = { code: e.code, message: e.message };
          }
          res[name] = { plain, fallback };
        }
        const load = await window.failure(window.Pocket.load('/models/tiny/', { backend, cache: false, restore: 'corrupt' }));
        const loadFallback = await window.Pocket.load('/models/tiny/', { backend, cache: false, restore: { id: 'corrupt', fallback: true } });
        out[backend] = { first, res, chat, load, loadFallback: loadFallback.restored };
        loadFallback.unload();
        const badId = await window.failure(m.sessions.save(''));
        out[backend].badId = badId;
        m.unload();
        await window.Pocket.cache.delete('/models/tiny/');
      }
      out.cacheKeys = (await (await caches.open('pocketrt-sessions-v1')).keys()).length;
      return out;
    }, BACKENDS);
    assert.equal(r.opfs, 'undefined', 'OPFS is hidden in this test');
    for (const backend of BACKENDS) {
      const { res, first, chat } = r[backend];
      const is = (got, code, re, what) => {
        assert.equal(got.code, code, `${backend} ${what}: ${JSON.stringify(got)}`);
        assert.match(got.message, re, `${backend} ${what}`);
      };
      is(res.truncated.plain, 'SESSION_CORRUPT', /truncated/, 'truncated');
      assert.ok(res.truncated.fallback.recovered, `${backend}: ${JSON.stringify(res.truncated.fallback)}`);
      assert.equal(res.truncated.fallback.tokens, first.tokens, 'a save cut short: the save before it comes back');
      assert.equal(res.truncated.fallback.prefilled, null, 'its rows restored');
      assert.deepEqual(res.truncated.fallback.messages, chat.slice(0, 2));
      is(res.corrupt.plain, 'SESSION_CORRUPT', /checksum/, 'a corrupt byte');
      assert.match(res.corrupt.fallback.prefilled ?? '', /checksum/, 'a corrupt row: its tokens prefilled');
      is(res.model.plain, 'SESSION_MISMATCH', /another model/, 'another model');
      assert.match(res.model.fallback.prefilled ?? '', /another model/);
      is(res.version.plain, 'SESSION_MISMATCH', /version 2/, 'another version');
      is(res.version.fallback, 'SESSION_MISMATCH', /version 2/, 'another version has no fallback');
      is(res.tokenizer.plain, 'SESSION_MISMATCH', /another tokenizer/, 'another tokenizer');
      is(res.tokenizer.fallback, 'SESSION_MISMATCH', /another tokenizer/, 'another tokenizer has no fallback');
      for (const name of ['corrupt', 'model']) {
        const f = res[name].fallback;
        assert.equal(f.restored, 0);
        assert.equal(f.cached, f.tokens, `${backend} ${name}: the prefilled history is in the cache`);
        assert.equal(f.messages.length, 4);
      }
      is(r[backend].load, 'SESSION_CORRUPT', /checksum/, 'Pocket.load with restore of a corrupt snapshot');
      assert.match(r[backend].loadFallback.prefilled ?? '', /checksum/, 'and with fallback');
      is(r[backend].badId, 'INVALID_ARGUMENT', /session id/, 'an empty id');
    }
    assert.equal(r.cacheKeys, 0, 'Pocket.cache.delete removed the Cache Storage snapshots');
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
function window_reply(t) {
  return { role: 'assistant', content: t.content };
}
