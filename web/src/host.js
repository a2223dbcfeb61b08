// The engine that every tab of a site shares (`Pocket.load(url, { shared: true })`): one
// model, loaded once, in a SharedWorker (shared-worker.js) or in the dedicated Worker of
// the tab elected leader (leader-worker.js); the tabs are its clients (shared.js).
//
// Every request of a client is a job in that client's queue; one job runs at a time, the
// clients served round robin. Each client keeps its own conversation: a session snapshot
// of its own (in the model's `tabs` scope of sessions.js), saved after each job that
// changed the KV cache and restored before the client's next job when another client's
// ran in between. So a tab's follow-up reuses its KV cache, and a host that takes over
// (the leader's tab closed) restores every tab's conversation from storage.
import { Pocket, pocketError } from './core.js';
import { CONVERSATION_OPS, autoSaveMessage, deviceLostMessage, errorFields, runOp } from './ops.js';
import { CLIENT_LOCK } from './shared-names.js';

/** Snapshots of tabs that no longer attach are removed this long after a host starts. */
const ORPHAN_MS = 60_000;

/** The options of the first attach that load the model (per-tab ones stay per tab). */
const PER_TAB = ['autoSave', 'restore', 'persist', 'shared'];

/** The ops that run on the tab's conversation (it is put into the KV cache first). */
const onConversation = (msg) =>
  CONVERSATION_OPS.has(msg.op) && (msg.op !== 'sessions' || msg.method === 'save' || msg.method === 'restore');

/** The ops that change the KV cache: the tab's snapshot is saved after them. */
const changesConversation = (msg) => onConversation(msg) && msg.method !== 'save';

export class EngineHost {
  /** `via`: "shared-worker" or "leader"; `post(client, message)` sends to a client;
   * `left(client)`: a client left (after its last message); `tab`: the page the host runs
   * in (the leader's; null in a SharedWorker). */
  constructor({ via, post, left = () => {}, tab = null }) {
    this.id = crypto.randomUUID();
    this.via = via;
    this.tab = tab;
    this.post = post;
    this.left = left;
    /** id → { id, queue, running, autoSave, stats } */
    this.clients = new Map();
    this.model = null;
    this.loading = null;
    this.progress = new Set();
    /** The client whose conversation the KV cache holds. */
    this.active = null;
    /** The client served last (round robin starts after it). */
    this.last = null;
    this.busy = false;
    /** The device was lost since the last reload. */
    this.lost = false;
    /** Work between jobs (the snapshot of a tab that left, unloading). */
    this.chores = [];
  }

  /** What `model.info.shared` says (shared.js turns `tab` into `here`). */
  get shared() {
    return { via: this.via, host: this.id, tabs: this.clients.size, tab: this.tab };
  }

  /** The announcement a client waits for (also its answer to `who`). */
  get hello() {
    return { type: 'host-up', ...this.shared, gpu: !!globalThis.navigator?.gpu };
  }

  /** A message `msg` ({ id, op, ... }) from client `from`. */
  receive(from, msg) {
    const client = this.clients.get(from);
    if (msg.op === 'attach') this.#attach(from, msg);
    else if (msg.op === 'abort') this.#abort(client, msg.target);
    else if (msg.op === 'unload') this.#detach(from, msg.id);
    else if (!client) this.#reply(from, msg.id, 'error', { message: 'this tab is not attached to the shared engine', code: 'UNLOADED' });
    else if (msg.op === 'stats' && client.stats) this.#reply(from, msg.id, 'result', { value: client.stats });
    else {
      const job = (model, reply, signal) => this.#run(client, msg, model, reply, signal);
      this.#enqueue(client, { id: msg.id, job, conversation: onConversation(msg), changes: changesConversation(msg) });
    }
  }

  #reply(client, id, type, fields = {}) {
    this.post(client, { id, type, ...fields });
  }

  #tell(message) {
    for (const id of this.clients.keys()) this.post(id, message);
  }

  async #attach(from, msg) {
    let client = this.clients.get(from);
    if (!client) {
      client = { id: from, queue: [], running: null, autoSave: null, stats: null };
      this.clients.set(from, client);
      // A tab holds its lock while it lives: granted here once the tab is gone.
      globalThis.navigator?.locks?.request(CLIENT_LOCK + from, () => this.#detach(from));
      this.#tell({ type: 'tabs', tabs: this.clients.size });
    }
    client.autoSave = msg.autoSave ?? null;
    client.attachId = msg.id;
    const onProgress = (event) => this.#reply(from, msg.id, 'progress', { event });
    // (Not when the tab left or aborted its load meanwhile.)
    const current = () => this.clients.get(from) === client && client.attachId === msg.id;
    try {
      await this.#load(msg, onProgress);
      if (!current()) return;
      let restored = null;
      if (msg.restore) {
        restored = await new Promise((resolve, reject) => {
          const job = (model) => model.sessions.restoreIfSaved(msg.restore.id, { fallback: msg.restore.fallback });
          this.#enqueue(client, { id: null, job, conversation: true, changes: true, settle: { resolve, reject } });
        });
      }
      if (!current()) return;
      this.#reply(from, msg.id, 'result', { value: { info: this.#info(), restored } });
    } catch (e) {
      if (client.attachId === msg.id) this.#reply(from, msg.id, 'error', errorFields(e));
    }
  }

  #info() {
    return { ...this.model.info, shared: this.shared };
  }

  /** Load the model of the first attach (the later ones wait for the same load). */
  async #load(msg, onProgress) {
    if (this.model) return;
    this.progress.add(onProgress);
    try {
      this.loading ??= this.#start(msg).finally(() => (this.loading = null));
      await this.loading;
    } finally {
      this.progress.delete(onProgress);
    }
  }

  async #start(msg) {
    const options = { ...msg.options, baseUrl: msg.baseUrl };
    for (const k of PER_TAB) delete options[k];
    this.model = await Pocket.load(msg.url, {
      ...options,
      onProgress: (event) => this.progress.forEach((f) => f(event)),
      onDeviceLost: (event) => {
        this.lost = !event.reload; // (autoReload: the Pocket reloads by itself)
        this.#tell(deviceLostMessage(event));
      },
    });
    if (!this.clients.size) {
      // Every tab left (or aborted its load) while it loaded.
      this.model.unload();
      this.model = null;
      return;
    }
    this.tabs = this.model.scopedSessions('tabs');
    setTimeout(() => this.chores.push(() => this.#removeOrphans()), ORPHAN_MS);
    this.#pump();
  }

  /** The snapshots of tabs that are not attached (their host closed before they left). */
  async #removeOrphans() {
    for (const { id } of await this.tabs.list()) {
      if (!this.clients.has(id)) await this.tabs.delete(id);
    }
  }

  /** Queue `job(model, reply, signal)` as call `id` of `client`: `conversation`, it runs
   * on the client's conversation; `changes`, it changes it; `settle` (internal jobs, `id`
   * null): { resolve, reject } instead of replies. */
  #enqueue(client, { id, job, conversation, changes, settle = null }) {
    client.queue.push({ id, job, conversation, changes, settle, controller: new AbortController() });
    this.#pump();
  }

  #abort(client, target) {
    if (!client) return;
    if (client.attachId === target) {
      // The load goes on for the other tabs; this one's attach ends here.
      client.attachId = null;
      this.#reply(client.id, target, 'error', { message: 'the load was aborted', code: 'ABORTED' });
      return;
    }
    const at = client.queue.findIndex((j) => j.id === target);
    if (at >= 0) {
      client.queue.splice(at, 1);
      this.#reply(client.id, target, 'error', { message: 'aborted before it ran', code: 'ABORTED' });
    } else if (client.running?.id === target) {
      client.running.controller.abort();
    }
  }

  /** The next client with work, round robin after the one served last. */
  #next() {
    const ids = [...this.clients.keys()];
    const from = ids.indexOf(this.last) + 1;
    for (let i = 0; i < ids.length; i++) {
      const client = this.clients.get(ids[(from + i) % ids.length]);
      if (client.queue.length) return client;
    }
    return null;
  }

  async #pump() {
    if (this.busy) return;
    this.busy = true;
    try {
      while (this.chores.length) await this.chores.shift()().catch((e) => console.warn(`pocketrt host: ${e?.message ?? e}`));
      const client = this.model && this.#next();
      if (!client) return;
      this.last = client.id;
      const job = client.queue.shift();
      client.running = job;
      await this.#execute(client, job);
      client.running = null;
    } finally {
      this.busy = false;
    }
    this.#pump();
  }

  async #execute(client, job) {
    const reply = (type, fields) => job.id !== null && this.#reply(client.id, job.id, type, fields);
    try {
      if (job.conversation) await this.#activate(client);
      const value = await job.job(this.model, reply, job.controller.signal);
      job.settle?.resolve(value);
    } catch (e) {
      if (job.settle) job.settle.reject(e);
      else reply('error', errorFields(e));
    }
    if (job.changes && this.clients.get(client.id) === client) await this.#saved(client);
  }

  /** Run a client's op; `reload` once for every tab (the first tab's after a loss), `stats`
   * kept per tab. */
  async #run(client, msg, model, reply, signal) {
    if (msg.op === 'reload') {
      if (this.lost) await model.reload();
      this.lost = false;
      reply('result', { value: model.info });
      return;
    }
    await runOp(model, msg, reply, signal);
    if (msg.op === 'generate' || msg.op === 'chat' || msg.op === 'completion') client.stats = model.stats();
  }

  /** Put `client`'s conversation into the KV cache (from its snapshot) unless it is there. */
  async #activate(client) {
    if (this.active === client.id) return;
    this.active = client.id;
    try {
      await this.tabs.restoreIfSaved(client.id, { fallback: true });
    } catch (e) {
      // The request reads its prompt again: slower, not wrong.
      console.warn(`pocketrt host: the conversation of tab ${client.id} was not restored: ${e?.message ?? e}`);
    }
  }

  /** After a job on `client`'s conversation: its snapshot, and its autoSave. */
  async #saved(client) {
    try {
      await this.tabs.save(client.id);
    } catch (e) {
      console.warn(`pocketrt host: the conversation of tab ${client.id} was not saved: ${e?.message ?? e}`);
    }
    const id = client.autoSave;
    if (!id) return;
    let event;
    try {
      event = { id, report: await this.model.sessions.save(id) };
    } catch (error) {
      event = { id, error };
    }
    this.post(client.id, autoSaveMessage(event));
  }

  /** Client `from` left (unloaded, or its tab closed): its work stops, its snapshot goes;
   * with the last client, the model. */
  #detach(from, callId = null) {
    const client = this.clients.get(from);
    if (client) {
      this.clients.delete(from);
      for (const job of client.queue) job.settle?.reject(pocketError('the tab left', 'ABORTED'));
      client.running?.controller.abort();
      if (this.active === from) this.active = null;
      this.chores.push(() => this.tabs?.delete(from) ?? Promise.resolve());
      if (!this.clients.size) {
        this.chores.push(async () => {
          if (this.clients.size || !this.model) return;
          this.model.unload();
          this.model = null;
          this.active = null;
        });
      }
      this.#tell({ type: 'tabs', tabs: this.clients.size });
    }
    if (callId !== null) this.#reply(from, callId, 'result', { value: null });
    if (client) this.left(from);
    this.#pump();
  }
}
