// A tab's handle on the engine that every tab of the origin shares for one model
// (`Pocket.load(url, { shared: true })`, `createWorker(undefined, { shared: true })`).
// The engine (host.js) lives in a SharedWorker where one can run the backend
// (shared-worker.js); elsewhere (no SharedWorker, or no WebGPU in one) in the dedicated
// Worker of the tab that holds the model's Web Lock (leader-worker.js: every tab sharing
// the model starts one, which waits for the lock), spoken to over a BroadcastChannel.
// When the leader's tab closes, the next tab's Worker gets the lock, loads the model
// from Cache Storage and announces itself; the tabs attach again, and their requests
// that had not streamed yet are sent again (the others fail with HOST_LOST).
import { RemoteModel, autoSaveEvent, settles } from './worker-client.js';
import { pocketError, requestPersist, restoreOption } from './core.js';
import { plainOptions } from './ops.js';
import { CHANNEL, CLIENT_LOCK } from './shared-names.js';

/** How long a tab waits for a host to answer (a model loading elsewhere answers at once). */
const HOST_TIMEOUT_MS = 60_000;

/** How long a new SharedWorker may take to answer before the tabs elect a leader instead. */
const SHARED_WORKER_TIMEOUT_MS = 10_000;

/** Messages of a call that mean its reply has begun (it is not sent again after a takeover). */
const STREAMED = new Set(['piece', 'token', 'begun', 'chunk']);

/** Whether `name` is a hub id `owner/name` (the rule of src/hub/choose.rs's is_hub_id). */
const HUB_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]*\/[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

/** The engine a load shares: the model's name (a hub id, else the absolute URL) and the
 * backend asked for (another backend is another engine). */
export function sharedKey(url, options = {}, base = globalThis.location?.href) {
  const name = String(url);
  const model = HUB_ID.test(name) ? name : new URL(name, base).href;
  return `${options.backend ?? 'auto'}|${model}`;
}

/** The candidate Worker of each model this page shares in leader mode (one per model). */
const candidates = new Map();

/** This page's id: a leader's host says which page it runs in (`info.shared.here`). */
const PAGE = crypto.randomUUID();

/** `info.shared` of a host's `shared` fields: { via, host, tabs, here }. */
function sharedInfo({ via, host, tabs, tab }) {
  return { via, host, tabs, here: tab === PAGE };
}

/** `Pocket`'s API on a shared engine: `load(url, options)` attaches this tab. */
export class SharedEngine {
  #nextId = 1;
  /** id → { op, fields, handler, streamed, retried } of the calls not yet answered. */
  #pending = new Map();
  #send = null;
  #close = null;
  #host = null;
  #attach = null;
  #releaseLock = null;
  #hostWaiters = [];

  constructor() {
    this.id = crypto.randomUUID();
    /** The model this handle loaded (a RemoteModel whose `info.shared` is kept current). */
    this.model = null;
  }

  /** Attach this tab to the shared engine of `url`, loading it there when no tab has yet. */
  async load(url, options = {}) {
    const { onProgress, signal, persist, onDeviceLost, onAutoSave, onHostChange, autoSave, restore, shared, ...rest } = options;
    if (rest.files) throw pocketError('a shared model cannot load local files (blob URLs are the page\'s own): load it without `shared`', 'INVALID_ARGUMENT');
    if (!globalThis.navigator?.locks || typeof BroadcastChannel !== 'function') {
      throw pocketError('sharing a model across tabs needs the Web Locks API and BroadcastChannel, which this browser lacks', 'UNSUPPORTED');
    }
    this.onDeviceLost = onDeviceLost;
    this.onAutoSave = onAutoSave;
    this.onHostChange = onHostChange;
    const key = sharedKey(url, rest, rest.baseUrl);
    await this.#holdLock();
    await this.#connect(key, rest.backend, shared);
    const persisted = persist ? await requestPersist() : null;
    this.#attach = {
      url: String(url),
      baseUrl: rest.baseUrl ?? globalThis.location?.href,
      options: plainOptions(rest),
      autoSave: autoSave ?? null,
    };
    let attached;
    try {
      attached = await this.call('attach', { ...this.#attach, restore: restoreOption(restore) }, {
        signal,
        onEvent: (m) => m.type === 'progress' && onProgress?.(m.event),
      });
    } catch (e) {
      this.terminate(); // the host lets this tab go
      throw e;
    }
    const { info, restored } = attached;
    this.model = new RemoteModel(this, { ...info, shared: sharedInfo(info.shared), persisted });
    this.model.restored = restored;
    return this.model;
  }

  /** A tab lock held until this handle ends: the host detaches the tab when it is freed. */
  #holdLock() {
    return new Promise((granted) => {
      navigator.locks.request(CLIENT_LOCK + this.id, () => {
        granted();
        return new Promise((release) => (this.#releaseLock = release));
      });
    });
  }

  /** Reach the host: the SharedWorker when it can run the backend, else the leader. */
  async #connect(key, backend, shared) {
    const wantGpu = backend !== 'cpu' && !!globalThis.navigator?.gpu;
    const via = shared?.via ?? (typeof SharedWorker === 'function' ? 'shared-worker' : 'leader');
    if (via === 'shared-worker') {
      const worker = new SharedWorker(new URL('./shared-worker.js', import.meta.url), { type: 'module', name: CHANNEL + key });
      const port = worker.port;
      port.onmessage = (e) => this.#receive(e.data);
      worker.onerror = () => this.#lost('the shared engine\'s SharedWorker failed');
      this.#send = (msg) => port.postMessage({ ...msg, from: this.id });
      this.#close = () => port.close();
      port.start();
      this.#send({ op: 'who' });
      const hello = await this.#waitHost(SHARED_WORKER_TIMEOUT_MS).catch(() => null);
      if (hello && (!wantGpu || hello.gpu)) return;
      // A SharedWorker that did not start (e.g. no module SharedWorkers), or one without
      // WebGPU where this page has it: the leader's Worker instead.
      port.close();
      this.#host = null;
    }
    const channel = new BroadcastChannel(CHANNEL + key);
    channel.onmessage = (e) => (e.data.to === this.id || e.data.to === '*') && this.#receive(e.data);
    this.#send = (msg) => channel.postMessage({ ...msg, from: this.id, to: 'host' });
    this.#close = () => channel.close();
    if (!candidates.has(key)) {
      const worker = new Worker(new URL('./leader-worker.js', import.meta.url), { type: 'module', name: `pocketrt leader candidate ${key}` });
      worker.postMessage({ key, tab: PAGE });
      candidates.set(key, worker);
    }
    this.#send({ op: 'who' });
    await this.#waitHost();
  }

  #waitHost(ms = HOST_TIMEOUT_MS) {
    if (this.#host) return Promise.resolve(this.#host);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(pocketError(`no shared engine answered in ${ms / 1000} s`, 'HOST_LOST')), ms);
      this.#hostWaiters.push((hello) => {
        clearTimeout(timer);
        resolve(hello);
      });
    });
  }

  #receive(m) {
    if (m.type === 'host-up') {
      const previous = this.#host;
      if (previous?.host === m.host) return;
      this.#host = m;
      this.#hostWaiters.splice(0).forEach((f) => f(m));
      if (previous && this.#attach) this.#takeOver(m, previous);
    } else if (m.type === 'tabs') {
      if (this.model?.info?.shared) this.model.info.shared.tabs = m.tabs;
    } else if (m.type === 'device-lost') {
      this.onDeviceLost?.(m.info);
    } else if (m.type === 'autosave') {
      this.onAutoSave?.(autoSaveEvent(m.event));
    } else {
      this.#pending.get(m.id)?.handler(m);
    }
  }

  /** A new host (the leader's tab closed): attach again, send again what had not streamed. */
  #takeOver(hello, previous) {
    const inFlight = [...this.#pending];
    const attach = this.call('attach', this.#attach);
    attach
      .then(({ info }) => this.model && (this.model.info = { ...info, shared: sharedInfo(info.shared), persisted: this.model.info.persisted }))
      .catch(() => {});
    for (const [id, p] of inFlight) {
      if (p.op === 'attach') {
        this.#send({ id, op: 'attach', ...p.fields });
      } else if (!p.streamed && !p.retried) {
        p.retried = true;
        this.#send({ id, op: p.op, ...p.fields });
      } else {
        p.handler({
          type: 'error',
          code: 'HOST_LOST',
          message: `the tab hosting the shared model closed while this request ${p.streamed ? 'was streaming' : 'ran a second time'}; send it again`,
        });
      }
    }
    const shared = sharedInfo(hello);
    if (this.model) this.model.info.shared = shared;
    this.onHostChange?.({ ...shared, previous: previous.host });
  }

  /** The host is gone with no successor (a failed SharedWorker): every call fails. */
  #lost(message) {
    for (const p of this.#pending.values()) p.handler({ type: 'error', code: 'HOST_LOST', message });
  }

  /** Send `op` to the host; `onEvent` sees its progress / token / piece messages. */
  call(op, fields = {}, { signal, onEvent } = {}) {
    if (op === 'unload') return this.#unload();
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(pocketError('aborted', 'ABORTED'));
      const onAbort = () => this.#send({ op: 'abort', target: id });
      signal?.addEventListener('abort', onAbort, { once: true });
      const pending = { op, fields, streamed: false, retried: false };
      pending.handler = (msg) => {
        if (settles(msg, resolve, reject)) {
          this.#pending.delete(id);
          signal?.removeEventListener('abort', onAbort);
        } else {
          if (STREAMED.has(msg.type)) pending.streamed = true;
          onEvent?.(msg);
        }
      };
      this.#pending.set(id, pending);
      this.#send({ id, op, ...fields });
    });
  }

  /** Leave the shared engine (it stays loaded for the other tabs; with the last, it
   * unloads). */
  async #unload() {
    if (!this.#send) return null;
    const id = this.#nextId++;
    const left = new Promise((resolve) => {
      const handler = (msg) => this.#pending.delete(id) && resolve(msg);
      this.#pending.set(id, { op: 'unload', fields: {}, handler });
    });
    this.#send({ id, op: 'unload' });
    await Promise.race([left, new Promise((r) => setTimeout(r, 2000))]);
    this.terminate();
    return null;
  }

  /** Stop using the shared engine now (as closing the tab would). */
  terminate() {
    this.#close?.();
    this.#send = null;
    this.#releaseLock?.();
  }
}
