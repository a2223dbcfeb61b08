// Session snapshots in the browser's storage: `model.sessions` (save, restore, list,
// delete, export, import) over the wasm session's `snapshotSave` / `snapshotRestore`
// (src/web/snapshot.rs: the crate's format, a save hands over only the bytes to append).
// Stored in the origin private file system, a folder per model:
// `pocketrt-sessions/<model key>/<id>.snap` (the snapshot as a first save or a rewrite
// wrote it), `<id>.snap.1`, `.2`, … (each later save's bytes, read back in order) and
// `<id>.json` ({ tokens, savedAt }). Each file is written whole by `createWritable()`,
// atomically (a sync access handle in a Worker of a browser without it): an append costs
// its own bytes, where `createWritable({ keepExistingData: true })` copies the whole file
// first (Chromium: 590 ms per append to a 64 MB file, 6 ms for a part file). Past
// MAX_PARTS parts the next save writes the file whole. Where OPFS cannot be written, in
// Cache Storage (`pocketrt-sessions-v1`, each save writes the whole file). Reads look in
// both.

const ROOT = 'pocketrt-sessions';
const CACHE = 'pocketrt-sessions-v1';
const SNAP = '.snap';
const INFO = '.json';
const MAX_ID = 200;

function coded(message, code) {
  const e = new Error(message);
  e.code = code;
  return e;
}

/** A short hash of a string (cyrb53: 53 bits as 14 hex digits). */
function hash(s) {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, '0');
}

/** The folder name of a model (its name as `Pocket.load` resolves it: an absolute URL
 * or a hub id): the end of the name, readable, and a hash of all of it. */
export function modelKey(name) {
  const tail = String(name).replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^[._]+|[._]+$/g, '').slice(-48);
  return `${tail}-${hash(String(name))}`;
}

/** A session id's file name (INVALID_ARGUMENT for what cannot be one). */
function fileName(id) {
  if (typeof id !== 'string' || id === '' || id.length > MAX_ID) {
    throw coded(`a session id is a string of 1 to ${MAX_ID} characters (got ${JSON.stringify(id)})`, 'INVALID_ARGUMENT');
  }
  return encodeURIComponent(id).replace(/\./g, '%2E');
}

const idOf = (file) => decodeURIComponent(file.slice(0, -SNAP.length));

const inDedicatedWorker = () => typeof DedicatedWorkerGlobalScope !== 'undefined' && globalThis instanceof DedicatedWorkerGlobalScope;

// --- the origin private file system ---------------------------------------------------

/** Part files a snapshot may have before the next append writes it whole again. */
const MAX_PARTS = 64;

const opfs = {
  /** Whether this context can write OPFS files (read: `getDirectory` alone). */
  writable() {
    const proto = globalThis.FileSystemFileHandle?.prototype;
    if (!globalThis.navigator?.storage?.getDirectory || !proto) return false;
    return 'createWritable' in proto || (inDedicatedWorker() && 'createSyncAccessHandle' in proto);
  },
  /** The root folder of every model's snapshots (null where there is none). */
  async root(create) {
    if (!globalThis.navigator?.storage?.getDirectory) return null;
    try {
      return await (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT, { create });
    } catch (e) {
      if (e?.name === 'NotFoundError' || e?.name === 'SecurityError' || e?.name === 'TypeError') return null;
      throw e;
    }
  },
  async dir(key, create) {
    const root = await this.root(create);
    try {
      return root && (await root.getDirectoryHandle(key, { create }));
    } catch (e) {
      if (e?.name === 'NotFoundError') return null;
      throw e;
    }
  },
  /** The files of snapshot `id` in `dir`, in order: the file, then its parts. */
  async files(dir, id) {
    const base = fileName(id) + SNAP;
    const parts = [];
    let head = null;
    for await (const [name, handle] of dir.entries()) {
      if (name === base) head = handle;
      const n = name.startsWith(`${base}.`) ? Number(name.slice(base.length + 1)) : NaN;
      if (Number.isInteger(n) && n > 0) parts.push([n, handle]);
    }
    parts.sort((a, b) => a[0] - b[0]);
    return head ? [head, ...parts.map((p) => p[1])] : [];
  },
  async size(key, id) {
    const dir = await this.dir(key, false);
    const files = dir ? await this.files(dir, id) : [];
    if (!files.length) return null;
    let n = 0;
    for (const f of files) n += (await f.getFile()).size;
    return n;
  },
  async read(key, id) {
    const dir = await this.dir(key, false);
    const files = dir ? await this.files(dir, id) : [];
    if (!files.length) return null;
    const blobs = await Promise.all(files.map((f) => f.getFile()));
    return new Uint8Array(await new Blob(blobs).arrayBuffer());
  },
  /** Write `chunks` (Uint8Arrays, in order) at `at` (the snapshot's size: an append, as
   * a part file of its own), or (`at` null) as the whole snapshot: its parts removed (the
   * newest first: what is left is an older snapshot), then the file replaced. */
  async write(key, id, chunks, at, info) {
    const dir = await this.dir(key, true);
    const files = await this.files(dir, id);
    if (at !== null && files.length - 1 >= MAX_PARTS) {
      const old = await this.read(key, id);
      return this.write(key, id, [old.subarray(0, at), ...chunks], null, info);
    }
    const base = fileName(id) + SNAP;
    if (at === null) {
      for (const f of files.slice(1).reverse()) await dir.removeEntry(f.name);
      await writeFile(await dir.getFileHandle(base, { create: true }), chunks);
    } else {
      if (!files.length) throw coded(`session "${id}" has no file to append to`, 'IO');
      const last = files.length > 1 ? Number(files.at(-1).name.slice(base.length + 1)) : 0;
      await writeFile(await dir.getFileHandle(`${base}.${last + 1}`, { create: true }), chunks);
    }
    const meta = await dir.getFileHandle(fileName(id) + INFO, { create: true });
    await writeFile(meta, [new TextEncoder().encode(JSON.stringify(info))]);
  },
  async list(key) {
    const dir = await this.dir(key, false);
    const out = [];
    if (!dir) return out;
    for await (const [name, handle] of dir.entries()) {
      if (handle.kind !== 'file' || !name.endsWith(SNAP)) continue;
      const id = idOf(name);
      let info = {};
      const meta = await fileIn(dir, fileName(id) + INFO);
      if (meta) info = JSON.parse((await (await meta.getFile()).text()) || '{}');
      const file = await handle.getFile();
      out.push({ id, bytes: await this.size(key, id), tokens: info.tokens ?? null, savedAt: info.savedAt ?? file.lastModified });
    }
    return out;
  },
  async remove(key, id) {
    const dir = await this.dir(key, false);
    if (!dir) return false;
    const files = await this.files(dir, id);
    for (const f of files.slice(1).reverse()) await dir.removeEntry(f.name);
    if (files.length) await dir.removeEntry(files[0].name);
    const meta = await fileIn(dir, fileName(id) + INFO);
    if (meta) await dir.removeEntry(meta.name);
    return files.length > 0;
  },
  /** Remove `key`'s folder (every model's: null); whether there was one. */
  async removeAll(key) {
    const root = await this.root(false);
    if (!root) return false;
    if (key === null) {
      await (await navigator.storage.getDirectory()).removeEntry(ROOT, { recursive: true });
      return true;
    }
    try {
      await root.removeEntry(key, { recursive: true });
      return true;
    } catch (e) {
      if (e?.name === 'NotFoundError') return false;
      throw e;
    }
  },
  /** Bytes of every snapshot (files and parts). */
  async bytes() {
    const root = await this.root(false);
    let n = 0;
    if (!root) return n;
    for await (const [, dir] of root.entries()) {
      if (dir.kind !== 'directory') continue;
      for await (const [name, f] of dir.entries()) {
        if (f.kind === 'file' && !name.endsWith(INFO)) n += (await f.getFile()).size;
      }
    }
    return n;
  },
};

/** The file `name` in `dir`, or null. */
async function fileIn(dir, name) {
  try {
    return await dir.getFileHandle(name);
  } catch (e) {
    if (e?.name === 'NotFoundError' || e?.name === 'TypeMismatchError') return null;
    throw e;
  }
}

/** Write `chunks` (in order) as a file's whole content: a `createWritable()` swap file
 * committed on close (atomic: a tab killed meanwhile leaves the old content), else (a
 * Worker of a browser without it) a sync access handle. */
async function writeFile(handle, chunks) {
  if (typeof handle.createWritable === 'function') {
    const w = await handle.createWritable();
    try {
      for (const c of chunks) await w.write(c);
      await w.close();
    } catch (e) {
      await w.abort().catch(() => {});
      throw e;
    }
    return;
  }
  const h = await handle.createSyncAccessHandle();
  try {
    h.truncate(0);
    let at = 0;
    for (const c of chunks) {
      const written = h.write(c, { at });
      if (written !== c.length) throw coded(`wrote ${written} of ${c.length} bytes`, 'IO');
      at += written;
    }
    h.flush();
  } finally {
    h.close();
  }
}

/** `chunks` joined into one array. */
function join(chunks) {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

// --- Cache Storage (where OPFS cannot be written) --------------------------------------

const cacheStore = {
  available: () => typeof globalThis.caches !== 'undefined',
  url(key, id) {
    const base = `${globalThis.location.origin}/.pocketrt-sessions/${key}/`;
    return id === undefined ? base : `${base}s-${fileName(id)}`;
  },
  async open() {
    return this.available() ? caches.open(CACHE) : null;
  },
  async response(key, id) {
    const c = this.available() && (await caches.has(CACHE)) ? await caches.open(CACHE) : null;
    return c ? ((await c.match(this.url(key, id))) ?? null) : null;
  },
  async size(key, id) {
    const r = await this.response(key, id);
    return r ? Number(r.headers.get('x-pocketrt-bytes')) : null;
  },
  async read(key, id) {
    const r = await this.response(key, id);
    return r ? new Uint8Array(await r.arrayBuffer()) : null;
  },
  async write(key, id, chunks, at, info) {
    const old = at === null ? [] : [((await this.read(key, id)) ?? new Uint8Array(0)).subarray(0, at)];
    const whole = join([...old, ...chunks]);
    const headers = {
      'content-type': 'application/octet-stream',
      'x-pocketrt-bytes': String(whole.length),
      'x-pocketrt-tokens': String(info.tokens ?? ''),
      'x-pocketrt-saved': String(info.savedAt),
    };
    await (await this.open()).put(this.url(key, id), new Response(whole, { headers }));
  },
  async entries(key) {
    if (!this.available() || !(await caches.has(CACHE))) return [];
    const c = await caches.open(CACHE);
    const prefix = key === null ? `${globalThis.location.origin}/.pocketrt-sessions/` : this.url(key);
    return (await c.keys()).filter((r) => r.url.startsWith(prefix)).map((r) => ({ c, r }));
  },
  async list(key) {
    const out = [];
    for (const { c, r } of await this.entries(key)) {
      const h = (await c.match(r)).headers;
      const tokens = h.get('x-pocketrt-tokens');
      out.push({
        id: decodeURIComponent(r.url.slice(this.url(key).length + 2)),
        bytes: Number(h.get('x-pocketrt-bytes')),
        tokens: tokens ? Number(tokens) : null,
        savedAt: Number(h.get('x-pocketrt-saved')),
      });
    }
    return out;
  },
  async remove(key, id) {
    if (!this.available() || !(await caches.has(CACHE))) return false;
    return (await caches.open(CACHE)).delete(this.url(key, id));
  },
  async removeAll(key) {
    const all = await this.entries(key);
    await Promise.all(all.map(({ c, r }) => c.delete(r)));
    return all.length > 0;
  },
  async bytes() {
    let n = 0;
    for (const { c, r } of await this.entries(null)) n += Number((await c.match(r)).headers.get('x-pocketrt-bytes'));
    return n;
  },
};

/** The store saves go to: OPFS where this context can write it, else Cache Storage. */
function writer() {
  if (opfs.writable()) return [opfs, cacheStore];
  if (cacheStore.available()) return [cacheStore, opfs];
  throw coded('this browser has neither the origin private file system nor Cache Storage', 'UNSUPPORTED');
}

async function readAny(key, id) {
  return (await opfs.read(key, id)) ?? (await cacheStore.read(key, id));
}

// Storage calls of this context, one at a time (a save's size check, plan and write go
// together).
let queue = Promise.resolve();
function serial(fn) {
  const run = queue.then(fn, fn);
  queue = run.catch(() => {});
  return run;
}

/** Remove the snapshots of the model `name` (every model's: null); whether any. */
export function deleteSessions(name) {
  const key = name === null ? null : modelKey(name);
  return serial(async () => {
    const a = await opfs.removeAll(key);
    const b = await cacheStore.removeAll(key);
    return a || b;
  });
}

/** Bytes of every model's snapshots. */
export function sessionBytes() {
  return serial(async () => (await opfs.bytes()) + (await cacheStore.bytes()));
}

/** Tell the engine that the file `id` changed outside its saves (best effort: a busy
 * model's next save sees the file's size differ and writes it anew). */
function forget(engine, id) {
  try {
    engine.forget(id);
  } catch {
    // busy or unloaded
  }
}

const now = () => globalThis.performance?.now?.() ?? Date.now();

/**
 * `model.sessions` of the model loaded as `name`, on `engine`: `save(id, fileBytes)` and
 * `restore(id, bytes, fallback)` (the wasm model's `snapshotSave` / `snapshotRestore`)
 * and `forget(id)` (`snapshotForget`: the file changed outside a save).
 */
export class Sessions {
  #key;
  #engine;

  constructor(name, engine) {
    this.#key = modelKey(name);
    this.#engine = engine;
  }

  /** Save the conversation as `id`: the positions added since its last save (a whole
   * file the first time). `{ id, tokens, positions, bytesWritten, bytes, rewrote,
   * seconds }`. */
  async save(id) {
    fileName(id);
    return serial(async () => {
      const t0 = now();
      const [store, other] = writer();
      const size = await store.size(this.#key, id);
      const d = await this.#engine.save(id, size ?? undefined);
      try {
        await store.write(this.#key, id, d.parts, d.rewrite ? null : d.at, { tokens: d.tokens, savedAt: Date.now() });
      } catch (e) {
        forget(this.#engine, id);
        throw coded(`saving session "${id}" failed: ${e?.message ?? e}`, e?.name === 'QuotaExceededError' ? 'QUOTA' : 'IO');
      }
      if (d.rewrite) await other.remove(this.#key, id).catch(() => {});
      return {
        id,
        tokens: d.tokens,
        positions: d.positions,
        bytesWritten: d.parts.reduce((n, p) => n + p.length, 0),
        bytes: d.fileBytes,
        rewrote: d.rewrite,
        seconds: (now() - t0) / 1000,
      };
    });
  }

  /** Restore the conversation saved as `id` (SESSION_NOT_FOUND when there is none):
   * `{ id, tokens, restored, prefilled, dropped, messages, bytes, seconds }`. */
  async restore(id, { fallback = false } = {}) {
    const r = await this.restoreIfSaved(id, { fallback });
    if (!r) throw coded(`no session snapshot "${id}" is saved for this model`, 'SESSION_NOT_FOUND');
    return r;
  }

  /** `restore`, or null when nothing is saved as `id`. */
  async restoreIfSaved(id, { fallback = false } = {}) {
    fileName(id);
    const t0 = now();
    const bytes = await serial(() => readAny(this.#key, id));
    if (!bytes) return null;
    const r = await this.#engine.restore(id, bytes, !!fallback);
    const { fileBytes, ...rest } = r;
    return { id, ...rest, bytes: fileBytes, seconds: (now() - t0) / 1000 };
  }

  /** This model's snapshots: `[{ id, bytes, tokens, savedAt }]`, the newest first. */
  async list() {
    return serial(async () => {
      const seen = new Map();
      for (const s of [...(await cacheStore.list(this.#key)), ...(await opfs.list(this.#key))]) seen.set(s.id, s);
      return [...seen.values()].sort((a, b) => b.savedAt - a.savedAt);
    });
  }

  /** Remove the snapshot `id`; whether there was one. */
  async delete(id) {
    fileName(id);
    return serial(async () => {
      forget(this.#engine, id);
      const a = await opfs.remove(this.#key, id);
      const b = await cacheStore.remove(this.#key, id);
      return a || b;
    });
  }

  /** The snapshot file `id` (a Uint8Array; null when there is none): to download, or
   * `import` elsewhere. */
  async export(id) {
    fileName(id);
    return serial(() => readAny(this.#key, id));
  }

  /** Store `bytes` (an exported snapshot) as `id`, replacing what was saved so; it is
   * checked when restored. */
  async import(id, bytes) {
    fileName(id);
    const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    return serial(async () => {
      forget(this.#engine, id);
      const [store, other] = writer();
      await store.write(this.#key, id, [data], null, { tokens: null, savedAt: Date.now() });
      await other.remove(this.#key, id).catch(() => {});
    });
  }
}
