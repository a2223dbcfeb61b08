// Headless Chromium with WebGPU (SwiftShader) through playwright-core; flags from DESIGN.md.
import { chromium } from 'playwright-core';
import fs from 'node:fs';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export function chromiumPath() {
  return process.env.CHROMIUM ?? CANDIDATES.find((p) => fs.existsSync(p));
}

function executable() {
  const executablePath = chromiumPath();
  if (!executablePath) {
    throw new Error('no Chromium found (apt-get install chromium, or set CHROMIUM=path)');
  }
  return executablePath;
}

export async function launch() {
  return chromium.launch({ executablePath: executable(), headless: true, args: ARGS });
}

/** A browser with a profile on disk (`userDataDir`): not incognito, as Playwright's
 * contexts are (Chromium calls no incognito page installable). `options`: the context's. */
export async function launchPersistent(userDataDir, options = {}) {
  return chromium.launchPersistentContext(userDataDir, { executablePath: executable(), headless: true, args: ARGS, ...options });
}

const ARGS = [
  '--enable-unsafe-webgpu',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  // performance.measureUserAgentSpecificMemory() at once, not at the next GC.
  '--enable-blink-features=ForceEagerMeasureMemory',
];
