// The browser tests: the npm package in headless Chromium (WebGPU on SwiftShader) against
// a local server. Needs pkg/ (scripts/build-web) and the fixture (cargo run --example
// web_fixture -- DIR LARGE_DIR; paths in POCKETRT_WEB_FIXTURE, POCKETRT_WEB_LARGE). Fails — never skips — when Chromium
// or WebGPU is missing. Screenshots go to web/test-results/. POCKETRT_WEB_PKG serves another
// built package folder as /pkg/ (e.g. an older build, for the WebGPU decode bench).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from './browser.js';
import { createServer } from './serve.js';
import { tests as packageTests } from './cases.js';
import { tests as ggufHubTests } from './cases-gguf-hub.js';
import { tests as threadTests } from './cases-threads.js';
import { tests as benchTests } from './cases-bench.js';
import { tests as wllamaTests } from './cases-wllama.js';
import { tests as apiTests } from './cases-api.js';
import { tests as faultTests } from './cases-faults.js';
import { tests as sessionTests } from './cases-sessions.js';
import { tests as sharedTests } from './cases-shared.js';
import { tests as appTests } from './cases-app.js';
import { tests as realTests } from './cases-real.js';
import { tests as speculativeTests } from './cases-speculative.js';

const tests = { ...packageTests, ...ggufHubTests, ...threadTests, ...apiTests, ...faultTests, ...sessionTests, ...sharedTests, ...appTests, ...realTests, ...speculativeTests, ...benchTests, ...wllamaTests };

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = process.env.POCKETRT_WEB_FIXTURE;
if (!fixture || !fs.existsSync(path.join(fixture, 'expected.json'))) {
  console.error('POCKETRT_WEB_FIXTURE must name the folder web_fixture wrote');
  process.exit(1);
}
const pkg = path.resolve(process.env.POCKETRT_WEB_PKG ?? path.join(here, '../../pkg'));
if (!fs.existsSync(path.join(pkg, 'pocketrt_bg.wasm'))) {
  console.error(`${pkg} is not built: run scripts/build-web`);
  process.exit(1);
}

const results = path.join(here, '../test-results');
fs.mkdirSync(results, { recursive: true });
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'pocketrt-web-'));
const models = { tiny: fixture };
if (process.env.POCKETRT_WEB_LARGE) models.large = process.env.POCKETRT_WEB_LARGE;
if (process.env.POCKETRT_WEB_BENCH_MODEL) models.bench = process.env.POCKETRT_WEB_BENCH_MODEL;
// The real coder GGUF's folder (cases-real.js, long tier).
if (process.env.POCKETRT_CODER_GGUF) models.coder = path.dirname(process.env.POCKETRT_CODER_GGUF);
const server = await createServer({ models, pkg });
const browser = await launch();
const only = process.argv[2];
let failed = 0;
try {
  for (const [name, fn] of Object.entries(tests)) {
    if (only && !name.includes(only)) continue;
    // Benches run only when named (`scripts/test-web bench`); the long tier's cases
    // when named (`scripts/test-web long_`) or with POCKETRT_WEB_LONG=1 (scripts/test --long).
    if (name.startsWith('bench_') && !only) continue;
    if (name.startsWith('long_') && !only && process.env.POCKETRT_WEB_LONG !== '1') continue;
    // A case may ask for its browser context's options (`fn.contextOptions`: a viewport,
    // touch, a device scale factor: cases-app.js's iPad and phone).
    const context = await browser.newContext(fn.contextOptions ?? {});
    const page = await context.newPage();
    const logs = [];
    page.on('console', (m) => logs.push(`[console] ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`[pageerror] ${e.message}`));
    const t0 = Date.now();
    try {
      server.requests.length = 0;
      await fn({ page, context, server, fixture, scratch, results });
      console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (e) {
      failed += 1;
      console.log(`FAIL ${name}: ${e.stack ?? e}`);
      for (const l of logs.slice(-20)) console.log(`     ${l}`);
    } finally {
      await context.close();
    }
  }
} finally {
  await browser.close();
  await server.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
console.log(failed ? `${failed} browser test(s) failed` : 'all browser tests passed');
process.exit(failed ? 1 : 0);
