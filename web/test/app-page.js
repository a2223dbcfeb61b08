// Driving the chat app (web/app, served at /app/) from Playwright, for cases-app.js: its
// hooks (`data-testid`s, `body[data-state]`), the sizes the cases run at, and the steps a
// person takes (open, load, settings, send, edit) with the checks they share (a reply's
// stats, no error, inert output, touch targets, the service worker, installability).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { launchPersistent } from './browser.js';
import { CACHE } from './cases.js';

export const IPAD_PORTRAIT = { viewport: { width: 820, height: 1180 }, hasTouch: true, deviceScaleFactor: 2 };
export const IPAD_LANDSCAPE = { viewport: { width: 1180, height: 820 }, hasTouch: true, deviceScaleFactor: 2 };
export const PHONE = { viewport: { width: 390, height: 844 }, hasTouch: true, deviceScaleFactor: 3, isMobile: true };

export const tid = (id) => `[data-testid="${id}"]`;
export const MESSAGE = tid('message');
export const ASSISTANT = `${MESSAGE}[data-role="assistant"]`;
export const USER = `${MESSAGE}[data-role="user"]`;
export const STATS = /^(\d+) tokens · TTFT (\d+) ms · ([\d.]+) tok\/s$/;

/** Before any page script: `window.__states`, each `body[data-state]` in turn (a short
 * generation's `generating` is not missed), and `window.__growth`, the lengths of the last
 * reply's text while generating (the stream). */
export function watchStates(context) {
  return context.addInitScript(() => {
    window.__states = [];
    window.__growth = [];
    const watch = () => {
      const seen = () => {
        const s = document.body.dataset.state;
        if (s && window.__states.at(-1) !== s) window.__states.push(s);
        if (s === 'generating') {
          const all = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
          const body = all[all.length - 1]?.querySelector('[data-testid="message-body"]');
          const n = body?.textContent.length ?? 0;
          if (window.__growth.at(-1) !== n) window.__growth.push(n);
        }
      };
      new MutationObserver(seen).observe(document.body, { attributes: true, childList: true, subtree: true, characterData: true });
      seen();
    };
    if (document.body) watch();
    else document.addEventListener('DOMContentLoaded', watch);
  });
}

/** Open the app; it is up when body[data-state] leaves "starting" (the controls work). */
export async function open(page, server, query) {
  await page.goto(`${server.url}/app/?${query}`);
  await started(page);
}

/** The app is up: body[data-state] has left "starting" (its controls work). */
export function started(page) {
  return page.waitForSelector('body[data-state]:not([data-state=starting])', { timeout: 30000 });
}

export async function shot(page, results, name) {
  await page.screenshot({ path: path.join(results, `app-${name}.png`) });
}

const touch = new WeakMap();

/** Tap on a touch screen, click otherwise. */
export async function press(page, locator, options = {}) {
  const l = typeof locator === 'string' ? page.locator(locator) : locator;
  if (!touch.has(page)) touch.set(page, await page.evaluate(() => navigator.maxTouchPoints > 0));
  if (touch.get(page)) await l.tap(options);
  else await l.click(options);
}

export async function waitState(page, state, timeout = 60000) {
  await page.waitForFunction(
    (want) => document.body.dataset.state === want || document.body.dataset.state === 'error',
    state,
    { timeout },
  );
  const now = await page.evaluate(() => document.body.dataset.state);
  if (now !== state) {
    const error = await page.locator(tid('error')).textContent().catch(() => '(no error banner)');
    throw new Error(`the app went to "${now}", not "${state}": ${error}`);
  }
}

/** Press `load` and wait for the model; returns the `load-status` text. */
export async function loadModel(page, { timeout = 60000 } = {}) {
  await press(page, tid('load'));
  await waitState(page, 'ready', timeout);
  return (await page.textContent(tid('load-status'))).trim();
}

/** Open or close what `id` names: a `<details>` (by its summary), else a button. */
export async function toggle(page, id) {
  const l = page.locator(tid(id)).first();
  if ((await l.evaluate((e) => e.localName)) === 'details') await press(page, l.locator('summary').first());
  else await press(page, l);
}

export async function openSettings(page, field) {
  if (!(await page.locator(tid(field)).isVisible())) await toggle(page, 'settings');
  await page.locator(tid(field)).waitFor({ state: 'visible', timeout: 5000 });
}

export async function closeSettings(page) {
  if (await page.locator('dialog[open]').count()) await page.keyboard.press('Escape');
  if (await page.locator(tid('temperature')).isVisible()) await toggle(page, 'settings');
}

/** Set settings fields (testid → value; booleans check a checkbox), opening the settings
 * first and closing them after. */
export async function settings(page, values) {
  await openSettings(page, Object.keys(values)[0]);
  for (const [id, v] of Object.entries(values)) {
    const field = page.locator(tid(id));
    if (typeof v === 'boolean') {
      await field.setChecked(v);
      continue;
    }
    await field.evaluate((e, value) => {
      e.value = value;
      e.dispatchEvent(new Event('input', { bubbles: true }));
      e.dispatchEvent(new Event('change', { bubbles: true }));
    }, String(v));
    assert.equal(await field.inputValue(), String(v), `the ${id} setting takes ${v}`);
  }
  await closeSettings(page);
}

/** The settings' values (opened and closed again). */
export async function settingValues(page, ids) {
  await openSettings(page, ids[0]);
  const out = {};
  for (const id of ids) out[id] = await page.locator(tid(id)).inputValue();
  await closeSettings(page);
  return out;
}

/** [role, text] of each message (the rendered body's text). */
export function transcript(page) {
  return page.locator(MESSAGE).evaluateAll((ms) =>
    ms.map((m) => [m.dataset.role, (m.querySelector('[data-testid="message-body"]') ?? m).textContent.trim()]),
  );
}

export const stateMark = (page) => page.evaluate(() => window.__states.length);

/** After `mark` (stateMark), a generation ran and the app is ready again with `replies`
 * assistant messages, the last with its stats: returns { tokens, ttft, tps, text }. */
export async function replyDone(page, mark, replies, { timeout = 60000 } = {}) {
  await page.waitForFunction(
    ({ mark, replies }) => {
      const states = window.__states.slice(mark);
      const all = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
      return (
        document.body.dataset.state === 'error' ||
        (states.includes('generating') &&
          document.body.dataset.state === 'ready' &&
          all.length === replies &&
          all[replies - 1].querySelector('[data-testid="reply-stats"]')?.textContent.trim())
      );
    },
    { mark, replies },
    { timeout },
  );
  await assertNoError(page);
  const last = page.locator(ASSISTANT).last();
  const stats = (await last.locator(tid('reply-stats')).textContent()).trim();
  const m = STATS.exec(stats);
  assert.ok(m, `reply-stats "${stats}" reads "N tokens · TTFT X ms · Y tok/s"`);
  const text = (await last.locator(tid('message-body')).textContent()).trim();
  return { tokens: Number(m[1]), ttft: Number(m[2]), tps: Number(m[3]), text, stats };
}

export async function assertNoError(page) {
  const state = await page.evaluate(() => document.body.dataset.state);
  const banner = page.locator(tid('error'));
  const shown = (await banner.count()) && (await banner.isVisible()) ? (await banner.textContent()).trim() : '';
  assert.ok(state !== 'error' && !shown, `no error: state ${state}, banner "${shown}"`);
}

/** Type `text`, press send, wait for the reply. */
export async function send(page, text, options) {
  const replies = await page.locator(ASSISTANT).count();
  await page.fill(tid('prompt'), text);
  const mark = await stateMark(page);
  await press(page, tid('send'));
  return replyDone(page, mark, replies + 1, options);
}

/** `send` is disabled and the composer says why (idle or loading). */
export async function composerBlocked(page, when) {
  assert.equal(await page.locator(tid('send')).isDisabled(), true, `send is disabled ${when}`);
  const reason = page.locator(tid('composer-reason'));
  assert.ok(await reason.isVisible(), `the composer's reason is shown ${when}`);
  const text = (await reason.textContent()).trim();
  assert.ok(text.length > 0, `the composer's reason has text ${when}`);
  return text;
}

/** The model option of the fixture (its data-model names /models/tiny/). */
export const tinyOption = (page) => page.locator(`${tid('model-option')}[data-model*="/models/tiny/"]`).first();

/** Bytes in the first "N unit" of a text ("1.2 MB used of 5 GB" → 1.2e6). */
export function firstBytes(text) {
  const m = /([\d.,]+)\s*(B|bytes|kB|KB|KiB|MB|MiB|GB|GiB|TB)\b/.exec(text);
  assert.ok(m, `a storage figure in "${text}"`);
  const unit = { B: 1, bytes: 1, kB: 1e3, KB: 1e3, KiB: 1024, MB: 1e6, MiB: 1048576, GB: 1e9, GiB: 1073741824, TB: 1e12 }[m[2]];
  return Number(m[1].replace(/,/g, '')) * unit;
}

/** The shards of /models/tiny/ in pocketrt's Cache Storage. */
export const cachedTinyFiles = (page) =>
  page.evaluate(async (name) => {
    if (!(await caches.has(name))) return 0;
    const keys = await (await caches.open(name)).keys();
    return keys.filter((r) => r.url.includes('/models/tiny/')).length;
  }, CACHE);

/** The page's service worker is active (it cached the app shell and the package). */
export async function serviceWorkerReady(page) {
  const r = await page.evaluate(() =>
    Promise.race([
      navigator.serviceWorker.ready.then((reg) => ({ scope: reg.scope, state: reg.active?.state })),
      new Promise((resolve) => setTimeout(() => resolve(null), 20000)),
    ]),
  );
  assert.ok(r, 'the app registers a service worker (navigator.serviceWorker.ready within 20 s)');
  return r;
}

/** Chromium's installability verdict on `url` and the manifest it parsed (CDP), in a
 * browser profile on disk: Playwright's own contexts are incognito ("in-incognito"). */
export async function installability(url, scratch, options) {
  const context = await launchPersistent(fs.mkdtempSync(path.join(scratch, 'profile-')), options);
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(url);
    await started(page);
    const cdp = await context.newCDPSession(page);
    const { installabilityErrors } = await cdp.send('Page.getInstallabilityErrors');
    const manifest = await cdp.send('Page.getAppManifest');
    return { errors: installabilityErrors, manifest };
  } finally {
    await context.close();
  }
}

/** No element in the messages can run script, and the page-level flag is unset. */
export async function assertInert(page) {
  await page.waitForTimeout(500); // an <img onerror> would have fired by now
  const found = await page.evaluate(() => {
    const bad = [];
    for (const m of document.querySelectorAll('[data-testid="message"]')) {
      for (const el of m.querySelectorAll('*')) {
        if (el.localName === 'script') bad.push('a <script> element');
        for (const a of el.attributes) {
          if (/^on/i.test(a.name)) bad.push(`an ${a.name} attribute on <${el.localName}>`);
          if (/^\s*javascript:/i.test(a.value)) bad.push(`a javascript: ${a.name} on <${el.localName}>`);
        }
        if (el.localName === 'a' && el.href && !/^(https?:|mailto:|#)/.test(el.getAttribute('href'))) {
          bad.push(`a link to ${el.getAttribute('href')}`);
        }
        if (el.localName === 'a' && el.getAttribute('href') && !/noopener/.test(el.rel ?? '')) {
          bad.push(`a link without rel=noopener: ${el.outerHTML}`);
        }
      }
    }
    return { bad, flag: window.__xss ?? null };
  });
  assert.deepEqual(found.bad, [], 'nothing in the messages can run script');
  assert.equal(found.flag, null, 'no script ran (window.__xss stays unset)');
}

/** Every one of these controls is a 44 × 44 px touch target at least. */
export async function touchTargets(page, ids) {
  for (const id of ids) {
    const l = page.locator(tid(id)).first();
    if (!(await l.isVisible())) continue;
    const box = await l.boundingBox();
    assert.ok(box.width >= 44 && box.height >= 44, `${id} is a 44 px target: ${box.width.toFixed(0)} × ${box.height.toFixed(0)}`);
  }
}

/** Edit the last user message (`from`) into `to` and send it: the composer (or an inline
 * editor) holds its text; the reply after it is replaced. */
export async function edit(page, from, to) {
  const replies = await page.locator(ASSISTANT).count();
  const lastUser = page.locator(USER).last();
  await press(page, lastUser.locator(tid('edit')));
  const inline = lastUser.locator('textarea');
  let sendButton = page.locator(tid('send'));
  if (await inline.count()) {
    assert.equal(await inline.inputValue(), from, 'the inline editor holds the message');
    await inline.fill(to);
    if (await lastUser.locator(tid('send')).count()) sendButton = lastUser.locator(tid('send'));
  } else {
    await page.waitForFunction((t) => document.querySelector('[data-testid="prompt"]').value === t, from, { timeout: 5000 });
    await page.fill(tid('prompt'), to);
  }
  const mark = await stateMark(page);
  await press(page, sendButton);
  return replyDone(page, mark, replies);
}
