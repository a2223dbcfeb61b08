// The WebKit test: Debian's WebKitGTK (no WebGPU on Linux, like a browser without it)
// driven through WebKitWebDriver's W3C WebDriver HTTP API, under Xvfb (scripts/test-web
// runs it with xvfb-run). Claims:
// - `backend: "auto"` without WebGPU loads the tiny fixture on the CPU backend and says why;
// - a second load reads every shard from Cache Storage;
// - the greedy tokens equal the native engine's CPU tokens (examples/web_fixture.rs);
// - a session snapshot saved and restored on the CPU backend continues the chat as the
//   uninterrupted session does, with no prefill (OPFS, or Cache Storage where OPFS cannot
//   be written from a page);
// - two pages share one CPU engine (`shared: true`), each page's tokens native;
// - the app (dist/app) loads the model on the CPU backend, sends a message, a reply comes,
//   regenerate replaces it, and after a reload the conversation and its KV cache are back;
// - threadSupport() reports what WebKit offers (printed).
// Fails — never skips — when WebKitWebDriver or MiniBrowser is missing.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createServer } from './serve.js';

const fixture = process.env.POCKETRT_WEB_FIXTURE;
const want = JSON.parse(fs.readFileSync(path.join(fixture, 'expected.json'), 'utf8'));
const shards = JSON.parse(fs.readFileSync(path.join(fixture, 'manifest.json'), 'utf8')).shards.length;

const DRIVER = process.env.WEBKIT_WEBDRIVER ?? '/usr/bin/WebKitWebDriver';
const BROWSERS = [
  '/usr/lib/x86_64-linux-gnu/webkitgtk-6.0/MiniBrowser',
  '/usr/lib/aarch64-linux-gnu/webkitgtk-6.0/MiniBrowser',
  '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
  '/usr/lib/aarch64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
];
const browser = process.env.WEBKIT_BROWSER ?? BROWSERS.find((p) => fs.existsSync(p));
assert.ok(fs.existsSync(DRIVER), `${DRIVER} is missing (apt-get install webkit2gtk-driver)`);
assert.ok(browser, 'MiniBrowser is missing (apt-get install gir1.2-webkit-6.0 webkit2gtk-driver)');

/** A free TCP port. */
function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One WebDriver command; throws with the driver's message on an error. */
async function command(base, method, route, body) {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${route}: ${JSON.stringify(json.value)}`);
  return json.value;
}

/** In the app's page: `$(testid)`, `set(testid, value)` (an input's value, with its events)
 * and `until(what, f, ms)` (polls f; rejects on the app's error state or a timeout). */
const APP_HELPERS = `     const $ = (id) => document.querySelector('[data-testid="' + id + '"]');
     const set = (id, value) => {
       const e = $(id);
       e.value = value;
       e.dispatchEvent(new Event('input', { bubbles: true }));
       e.dispatchEvent(new Event('change', { bubbles: true }));
     };
     const until = (what, f, ms = 60000) => new Promise((resolve, reject) => {
       const t0 = Date.now();
       const poll = () => {
         let v;
         try { v = f(); } catch {}
         if (v) resolve(v);
         else if (document.body.dataset.state === 'error') reject(new Error(what + ': ' + $('error')?.textContent));
         else if (Date.now() - t0 > ms) reject(new Error('timed out: ' + what + ' (state ' + document.body.dataset.state + ')'));
         else setTimeout(poll, 50);
       };
       poll();
     });
`;

const server = await createServer({ models: { tiny: fixture } });
const port = await freePort();
const driver = spawn(DRIVER, [`--port=${port}`, '--host=127.0.0.1'], { stdio: 'inherit' });
const base = `http://127.0.0.1:${port}`;
let session = null;
let failed = false;
try {
  for (let i = 0; ; i++) {
    try {
      await command(base, 'GET', '/status');
      break;
    } catch (e) {
      if (i > 100) throw new Error(`WebKitWebDriver did not start: ${e.message}`);
      await sleep(100);
    }
  }
  const caps = {
    capabilities: {
      alwaysMatch: {
        'webkitgtk:browserOptions': { binary: browser, args: ['--automation'] },
        timeouts: { script: 120000 },
      },
    },
  };
  session = (await command(base, 'POST', '/session', caps)).sessionId;
  const s = `/session/${session}`;
  const run = (script, args = []) => command(base, 'POST', `${s}/execute/async`, { script, args });

  await command(base, 'POST', `${s}/url`, { url: `${server.url}/test/` });
  const r = await run(
    `const [prompt, n, done] = arguments;
     (async () => {
       const { Pocket, hasWebGPU, threadSupport } = await import('/pkg/pocket.js');
       await caches.delete('pocketrt-v1');
       const first = await Pocket.load('/models/tiny/');
       first.unload();
       const model = await Pocket.load('/models/tiny/');
       const tokens = await model.generateTokens(prompt, { maxTokens: n });
       const text = model.decode(tokens);
       return { webgpu: hasWebGPU(), first: first.info, second: model.info, tokens, text,
                threads: threadSupport() };
     })().then(done, (e) => done({ error: String(e.code) + ' ' + e.message }));`,
    [want.prompt, want.tokens.length],
  );
  assert.ok(!r.error, `WebKit load/generate failed: ${r.error}`);
  console.log(`webkit: backend ${r.second.backend} (${r.second.backendReason}); ` +
    `threads: ${JSON.stringify(r.threads)}`);
  assert.equal(r.webgpu, false, 'WebKitGTK has no WebGPU');
  assert.equal(r.second.backend, 'cpu');
  assert.match(r.second.backendReason, /no WebGPU/);
  assert.equal(r.first.shardsFetched, shards, 'the first load fetches every shard');
  assert.equal(r.second.shardsFromCache, shards, 'the second load reads every shard from Cache Storage');
  assert.equal(r.second.shardsFetched, 0);
  assert.deepEqual(r.tokens, want.cpu_tokens, `WebKit's tokens equal native (${want.cpu_engine})`);
  console.log(`ok   webkit: cached load, ${r.tokens.length} tokens equal native: ${JSON.stringify(r.text)}`);

  // Session snapshots on the CPU backend: a chat saved, the model loaded again with
  // `restore`, the next reply equal to the uninterrupted one with the history cached.
  const snap = await run(
    `const done = arguments[0];
     (async () => {
       const { Pocket } = await import('/pkg/pocket.js');
       // Replies of letters (the fixture's specials and stray bytes do not render back:
       // see cases-sessions.js).
       const letters = { 32: 100 };
       for (let c = 97; c <= 122; c++) letters[c] = 100;
       const turn = async (m, messages) => {
         const r = await m.chat.completions.create({ messages, max_tokens: 6, temperature: 0, logprobs: true, logit_bias: letters });
         return { content: r.choices[0].message.content, cached: r.usage.prompt_tokens_details?.cached_tokens,
                  tokens: r.choices[0].logprobs.content.map((t) => [t.token, t.logprob]) };
       };
       const u1 = { role: 'user', content: 'Hello, pocket!' };
       const m = await Pocket.load('/models/tiny/', { cache: false });
       const a1 = await turn(m, [u1]);
       const saved = await m.sessions.save('webkit');
       const next = [u1, { role: 'assistant', content: a1.content }, { role: 'user', content: 'And then?' }];
       const want = await turn(m, next);
       m.unload();
       const back = await Pocket.load('/models/tiny/', { cache: false, restore: 'webkit' });
       const got = await turn(back, back.restored.messages.concat([next[2]]));
       const proto = globalThis.FileSystemFileHandle?.prototype ?? {};
       const store = navigator.storage?.getDirectory && 'createWritable' in proto ? 'OPFS'
         : 'Cache Storage; OPFS: getDirectory ' + typeof navigator.storage?.getDirectory +
           ', createWritable ' + ('createWritable' in proto) +
           ', createSyncAccessHandle ' + ('createSyncAccessHandle' in proto);
       const list = await back.sessions.list();
       back.unload();
       await Pocket.cache.delete('/models/tiny/');
       return { saved, restored: back.restored, want, got, store, list, backend: back.info.backend };
     })().then(done, (e) => done({ error: String(e.code) + ' ' + e.message }));`,
  );
  assert.ok(!snap.error, `WebKit session snapshot failed: ${snap.error}`);
  assert.equal(snap.backend, 'cpu');
  assert.equal(snap.restored.prefilled, null, `the CPU rows are restored: ${snap.restored.prefilled}`);
  assert.equal(snap.restored.tokens, snap.saved.tokens);
  assert.equal(snap.got.cached, snap.restored.tokens, 'the history is in the KV cache (no prefill)');
  assert.deepEqual(snap.got.tokens, snap.want.tokens, 'the reply after a restore equals the uninterrupted one');
  assert.deepEqual(snap.list.map((x) => x.id), ['webkit']);
  console.log(`ok   webkit session snapshot (${snap.store}): ${snap.restored.tokens} tokens, ${snap.restored.bytes} B, ` +
    `saved in ${(snap.saved.seconds * 1000).toFixed(1)} ms, restored in ${(snap.restored.seconds * 1000).toFixed(1)} ms`);

  // Two pages share one CPU engine (`shared: true`): the second attaches to the first's.
  const sharedLoad = `const [prompt, n, done] = arguments;
     (async () => {
       const { Pocket } = await import('/pkg/pocket.js');
       const t0 = performance.now();
       window.model = await Pocket.load('/models/tiny/', { shared: true });
       const ms = performance.now() - t0;
       const tokens = [];
       for await (const _ of window.model.generate(prompt, { maxTokens: n, onToken: (p) => tokens.push(p.token) }));
       return { info: window.model.info, ms, tokens, tabs: window.model.info.shared.tabs };
     })().then(done, (e) => done({ error: String(e.code) + ' ' + e.message }));`;
  const first = await run(sharedLoad, [want.prompt, want.tokens.length]);
  assert.ok(!first.error, `WebKit shared load failed: ${first.error}`);
  const tab1 = await command(base, 'GET', `${s}/window`);
  const tab2 = (await command(base, 'POST', `${s}/window/new`, { type: 'tab' })).handle;
  await command(base, 'POST', `${s}/window`, { handle: tab2 });
  await command(base, 'POST', `${s}/url`, { url: `${server.url}/test/` });
  const fetched = server.requests.length;
  const second = await run(sharedLoad, [want.prompt, want.tokens.length]);
  assert.ok(!second.error, `WebKit's second shared load failed: ${second.error}`);
  assert.equal(second.info.shared.host, first.info.shared.host, 'one engine for both pages');
  assert.equal(second.tabs, 2);
  assert.equal(second.info.backend, 'cpu');
  assert.ok(!server.requests.slice(fetched).some((r) => r.endsWith('.bin')), 'the second page fetches no weights');
  assert.deepEqual(first.tokens, want.cpu_tokens, 'the first page\'s tokens equal native');
  assert.deepEqual(second.tokens, want.cpu_tokens, 'the second page\'s tokens equal native');
  await command(base, 'DELETE', `${s}/window`);
  await command(base, 'POST', `${s}/window`, { handle: tab1 });
  console.log(`ok   webkit: two pages share one CPU engine (${second.info.shared.via}); the second load ${second.ms.toFixed(0)} ms`);

  // The app (dist/app): the model loads on the CPU backend (auto: no WebGPU), a message
  // is sent and a reply comes with its stats.
  const appStarted = Date.now();
  await command(base, 'POST', `${s}/url`, { url: `${server.url}/app/?model=/models/tiny/` });
  const app = await run(
    `const done = arguments[0];
${APP_HELPERS}     (async () => {
       await until('the app starts', () => document.body.dataset.state === 'idle' && $('load'));
       $('load').click();
       await until('the model loads', () => document.body.dataset.state === 'ready');
       if (!$('temperature')?.checkVisibility?.()) $('settings').click();
       set('temperature', '0');
       set('max-tokens', '8');
       set('prompt', 'Hi');
       await until('send is enabled', () => !$('send').disabled);
       $('send').click();
       const replies = () => document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
       const stats = await until('the reply', () => document.body.dataset.state === 'ready' &&
         replies()[0]?.querySelector('[data-testid="reply-stats"]')?.textContent.trim());
       return { backend: $('backend').textContent.trim(), dataBackend: document.body.dataset.backend,
                status: $('load-status').textContent.trim(), stats };
     })().then(done, (e) => done({ error: e.message }));`,
  );
  assert.ok(!app.error, `the app in WebKit: ${app.error}`);
  assert.equal(app.dataBackend, 'cpu');
  assert.match(app.backend, /^CPU/);
  assert.match(app.stats, /^[1-8] tokens · TTFT \d+ ms · [\d.]+ tok\/s$/, 'the reply has its stats');
  console.log(`ok   webkit app: ${app.backend}; ${app.stats} (${((Date.now() - appStarted) / 1000).toFixed(1)} s)`);

  // Regenerate replaces the reply; a reload shows the conversation (IndexedDB in WebKit),
  // the load restores its KV cache from the session snapshot, and the chat goes on.
  const regenerated = await run(
    `const done = arguments[0];
${APP_HELPERS}
     (async () => {
       const replies = () => document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
       // (The old reply's element is marked: the new one is drawn in a new element.)
       replies()[0].dataset.old = '1';
       replies()[0].querySelector('[data-testid="regenerate"]').click();
       await until('the new reply', () => document.body.dataset.state === 'ready' &&
         !replies()[0]?.dataset.old && replies()[0]?.querySelector('[data-testid="reply-stats"]'));
       return { messages: document.querySelectorAll('[data-testid="message"]').length };
     })().then(done, (e) => done({ error: e.message }));`,
  );
  assert.ok(!regenerated.error, `regenerate in WebKit: ${regenerated.error}`);
  assert.equal(regenerated.messages, 2, 'regenerate replaces the reply');
  await command(base, 'POST', `${s}/refresh`, {});
  const resumed = await run(
    `const done = arguments[0];
${APP_HELPERS}
     (async () => {
       await until('the app starts', () => document.body.dataset.state === 'idle' && $('load'));
       // (The stored conversation is drawn just after the controls start.)
       const shown = await until('the stored conversation', () =>
         document.querySelectorAll('[data-testid="message"]').length, 10000).catch(() => 0);
       $('load').click();
       await until('the model loads', () => document.body.dataset.state === 'ready');
       const status = $('load-status').textContent.trim();
       set('prompt', 'More');
       await until('send is enabled', () => !$('send').disabled);
       $('send').click();
       const replies = () => document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
       await until('the next reply', () => document.body.dataset.state === 'ready' &&
         replies()[1]?.querySelector('[data-testid="reply-stats"]'));
       return { shown, status, messages: document.querySelectorAll('[data-testid="message"]').length };
     })().then(done, (e) => done({ error: e.message }));`,
  );
  assert.ok(!resumed.error, `the app after a reload in WebKit: ${resumed.error}`);
  assert.equal(resumed.shown, 2, 'the reloaded app shows the conversation');
  assert.match(resumed.status, /restored \(\d+ tokens, no prefill\)/, `the KV cache restored: ${resumed.status}`);
  assert.equal(resumed.messages, 4, 'the conversation goes on after the reload');
  console.log(`ok   webkit app: regenerate, reload (${resumed.status}), the chat goes on`);
} catch (e) {
  failed = true;
  console.log(`FAIL webkit: ${e.stack ?? e}`);
} finally {
  if (session) await command(base, 'DELETE', `/session/${session}`).catch(() => {});
  driver.kill();
  await server.close();
}
process.exit(failed ? 1 : 0);
