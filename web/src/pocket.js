// The npm package's entry: core.js's API, and what starts Workers — `createWorker`, and
// `Pocket.load(url, { shared: true })` (shared.js). Kept out of core.js, which the
// Workers run themselves: a bundler (Vite) bundles each `new Worker(new URL(...))` it
// finds, and one in a Worker's own code would be a cycle.
import { useSharedLoader } from './core.js';
import { PocketWorker } from './worker-client.js';
import { SharedEngine } from './shared.js';

export * from './core.js';
export { default } from './core.js';
export { PocketWorker } from './worker-client.js';
export { SharedEngine } from './shared.js';

useSharedLoader((url, options) => new SharedEngine().load(url, options));

/** Start a PocketWorker (the demo's way to keep the page responsive); with `{ shared:
 * true }`, a handle on the engine every tab of the origin shares (shared.js: its `load`
 * attaches this tab). */
export function createWorker(url, { shared = false } = {}) {
  return shared ? new SharedEngine() : PocketWorker.create(url);
}
