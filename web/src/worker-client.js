// The page side of the pocketrt Worker: the same API as `Pocket`, every call a message.
import { apiError } from './completions.js';
import { infoGetters, pocketError as coded, requestPersist } from './core.js';

let nextId = 1;

/** Whether message `msg` of a call ends it: its result resolves, its error rejects (an
 * API error with OpenAI's shape again). */
export function settles(msg, resolve, reject) {
  if (msg.type === 'result') resolve(msg.value);
  else if (msg.type !== 'error') return false;
  else if (msg.openai) reject(apiError({ openai: msg.openai, code: msg.code, status: msg.status }));
  else reject(coded(msg.message, msg.code));
  return true;
}

/** A Worker running pocketrt (one model at a time). */
export class PocketWorker {
  constructor(worker) {
    this.worker = worker;
    this.handlers = new Map();
    /** `Pocket.cache`, run in the worker (it is the page's Cache Storage too). */
    const call = (method, url) => this.call('cache', { method, url: url === undefined ? undefined : String(url), base: globalThis.location?.href });
    this.cache = {
      list: () => call('list'),
      has: (url) => call('has', url),
      delete: (url) => call('delete', url),
      clear: () => call('clear'),
      usage: () => call('usage'),
    };
    worker.onmessage = (e) => {
      if (e.data.type === 'device-lost') this.onDeviceLost?.(e.data.info);
      else if (e.data.type === 'autosave') this.onAutoSave?.(autoSaveEvent(e.data.event));
      else this.handlers.get(e.data.id)?.(e.data);
    };
    worker.onerror = (e) => {
      const err = coded(`the pocketrt worker failed: ${e.message ?? e}`, 'WORKER');
      for (const h of this.handlers.values()) h({ type: 'error', message: err.message, code: err.code });
    };
  }

  /** Start a module Worker from `url` (default: worker.js next to this file). */
  static create(url = new URL('./worker.js', import.meta.url)) {
    return new PocketWorker(new Worker(url, { type: 'module' }));
  }

  /** Send `op`; `onEvent` sees progress / token / piece messages. Resolves with the result. */
  call(op, fields = {}, { signal, onEvent } = {}) {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => this.worker.postMessage({ op: 'abort', target: id });
      if (signal?.aborted) return reject(coded('aborted', 'ABORTED'));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.handlers.set(id, (msg) => {
        if (settles(msg, resolve, reject)) {
          this.handlers.delete(id);
          signal?.removeEventListener('abort', onAbort);
        } else {
          onEvent?.(msg);
        }
      });
      this.worker.postMessage({ id, op, ...fields });
    });
  }

  /** Load a model in the worker; options as `Pocket.load` (functions other than onProgress are not sent;
   * `persist` is asked here: Workers have no `navigator.storage.persist`). */
  async load(url, options = {}) {
    const { onProgress, signal, persist, onDeviceLost, onAutoSave, ...rest } = options;
    this.onDeviceLost = onDeviceLost;
    this.onAutoSave = onAutoSave;
    const persisted = persist ? await requestPersist() : null;
    // Resolved in the worker against this page's URL (hub ids stay as they are).
    const page = globalThis.location?.href;
    const { info, restored } = await this.call('load', { url: String(url), options: { ...rest, baseUrl: page } }, {
      signal,
      onEvent: (m) => m.type === 'progress' && onProgress?.(m.event),
    });
    const model = new RemoteModel(this, { ...info, persisted });
    model.restored = restored;
    return model;
  }

  terminate() {
    this.worker.terminate();
  }
}

/** A model loaded in a PocketWorker. */
export class RemoteModel {
  constructor(worker, info) {
    this.worker = worker;
    this.info = info;
    this.chat = Object.assign((messages, options) => this.#stream('chat', { messages }, options), {
      completions: { create: (request, options) => this.#create('chat', request, options) },
    });
    this.completions = { create: (request, options) => this.#create('text', request, options) };
    /** `embeddings.create(request)` in the worker. */
    this.embeddings = { create: (request) => worker.call('embeddings', { request }) };
    /** `Pocket.sessions` in the worker (the page's OPFS and Cache Storage too). */
    const call = (method, ...args) => worker.call('sessions', { method, args });
    this.sessions = {
      save: (id) => call('save', id),
      restore: (id, options) => call('restore', id, options),
      list: () => call('list'),
      delete: (id) => call('delete', id),
      export: (id) => call('export', id),
      import: (id, bytes) => call('import', id, bytes),
    };
    /** What the `restore` load option restored (null: nothing saved). */
    this.restored = null;
  }

  generate(prompt, options = {}) {
    return this.#stream('generate', { prompt }, options);
  }

  encode(text) {
    return this.worker.call('encode', { text });
  }

  stats() {
    return this.worker.call('stats');
  }

  unload() {
    return this.worker.call('unload');
  }

  /** Bytes of the buffers on the model's WebGPU device (0 on the CPU backend). */
  gpuBytes() {
    return this.worker.call('gpu-bytes');
  }

  /** Test hook: `Pocket.destroyDeviceForTesting()` in the worker. */
  destroyDeviceForTesting() {
    return this.worker.call('destroy-device-for-testing');
  }

  /** `Pocket.reload()` in the worker (after GPU_LOST). */
  async reload() {
    const { persisted, shared } = this.info;
    this.info = { ...(await this.worker.call('reload')), persisted, ...(shared && { shared }) };
  }

  /** Text pieces of a generation, as an async iterator fed by the worker's messages. */
  #stream(op, fields, options = {}) {
    const { signal, onToken, ...rest } = options;
    return this.#events(op, { ...fields, options: rest }, signal, (m, push) => {
      if (m.type === 'piece') push(m.text);
      if (m.type === 'token') onToken?.(m.piece);
    }).items;
  }

  /** OpenAI's `create` in the worker: the response, or (`stream: true`) its chunks once the
   * worker has begun (so a bad request rejects here, as on the page). */
  async #create(kind, request, options = {}) {
    if (!request?.stream) {
      return this.worker.call('completion', { kind, request }, { signal: options.signal });
    }
    let begun;
    const started = new Promise((resolve) => (begun = resolve));
    const { items, done } = this.#events('completion', { kind, request }, options.signal, (m, push) => {
      if (m.type === 'begun') begun();
      if (m.type === 'chunk') push(m.chunk);
    });
    await Promise.race([started, done]);
    return items;
  }

  /** Start `op` in the worker; `items` iterates what `onEvent` pushes until the call ends,
   * `done` settles with the call (rejects with its error). */
  #events(op, fields, signal, onEvent) {
    // Aborted by the caller's signal, or when the caller stops iterating early.
    const stop = new AbortController();
    if (signal?.aborted) stop.abort();
    signal?.addEventListener('abort', () => stop.abort(), { once: true });
    const queue = [];
    let wake = null;
    let finished = false;
    let failure = null;
    const push = (item) => {
      queue.push(item);
      wake?.();
    };
    const done = this.worker
      .call(op, fields, { signal: stop.signal, onEvent: (m) => onEvent(m, push) })
      .catch((e) => {
        failure = e;
        throw e;
      })
      .finally(() => {
        finished = true;
        wake?.();
      });
    done.catch(() => {}); // reported through `items` (or the caller's await of `done`)
    return { items: drain(), done };
    async function* drain() {
      try {
        for (;;) {
          if (queue.length) {
            yield queue.shift();
          } else if (failure) {
            throw failure;
          } else if (finished) {
            return;
          } else {
            await new Promise((r) => (wake = r));
            wake = null;
          }
        }
      } finally {
        if (!finished) stop.abort();
      }
    }
  }
}

// `backend`, `backendReason` and `threads` (the worker's model's), from `info`.
infoGetters(RemoteModel);

/** An autoSave event from the worker, its error an `Error` with its `code` again. */
export function autoSaveEvent(event) {
  return event.error ? { ...event, error: coded(event.error.message, event.error.code) } : event;
}
