// The pocketrt Worker: holds one model and runs it off the page's thread. Spoken to by
// worker-client.js (messages {id, op, ...}; replies {id, type, ...}).
import { Pocket, pocketError } from './pocket.js';

let model = null;
const controllers = new Map();
/** What `model.sessions` offers through op "sessions". */
const SESSION_METHODS = ['save', 'restore', 'list', 'delete', 'export', 'import'];

function reply(id, type, fields = {}) {
  self.postMessage({ id, type, ...fields });
}

function fail(id, e) {
  // An API error keeps OpenAI's shape (`error`) and its status across the message.
  const openai = e?.error ? { error: e.error } : undefined;
  reply(id, 'error', { message: String(e?.message ?? e), code: e?.code ?? 'INTERNAL', openai, status: e?.status });
}

async function handle(msg) {
  const { id, op } = msg;
  if (op === 'abort') {
    controllers.get(msg.target)?.abort();
    return;
  }
  const controller = new AbortController();
  controllers.set(id, controller);
  const signal = controller.signal;
  try {
    if (op === 'load') {
      model?.unload();
      model = null;
      model = await Pocket.load(msg.url, {
        ...msg.options,
        signal,
        onProgress: (event) => reply(id, 'progress', { event }),
        // Told to the page as a message of its own (the load's call is over by then).
        onDeviceLost: ({ reason, message, reload }) =>
          self.postMessage({ type: 'device-lost', info: { reason, message, reloading: !!reload } }),
        // Each autoSave, told to the page as a message of its own.
        onAutoSave: ({ id: session, report, error }) =>
          self.postMessage({
            type: 'autosave',
            event: { id: session, report, error: error && { message: error.message, code: error.code } },
          }),
      });
      reply(id, 'result', { value: { info: model.info, restored: model.restored } });
    } else if (op === 'cache') {
      reply(id, 'result', { value: await Pocket.cache[msg.method](msg.url, msg.base) });
    } else if (!model) {
      throw pocketError('no model is loaded in the worker', 'UNLOADED');
    } else if (op === 'generate' || op === 'chat') {
      const options = { ...msg.options, signal, onToken: (p) => reply(id, 'token', { piece: p }) };
      const stream =
        op === 'chat' ? model.chat(msg.messages, options) : model.generate(msg.prompt, options);
      for await (const text of stream) reply(id, 'piece', { text });
      reply(id, 'result', { value: model.stats() });
    } else if (op === 'completion') {
      const api = msg.kind === 'chat' ? model.chat.completions : model.completions;
      const out = await api.create(msg.request, { signal });
      if (msg.request.stream) {
        reply(id, 'begun');
        for await (const chunk of out) reply(id, 'chunk', { chunk });
        reply(id, 'result', { value: null });
      } else {
        reply(id, 'result', { value: out });
      }
    } else if (op === 'sessions') {
      if (!SESSION_METHODS.includes(msg.method)) throw pocketError(`unknown sessions method ${msg.method}`, 'INVALID_ARGUMENT');
      reply(id, 'result', { value: await model.sessions[msg.method](...msg.args) });
    } else if (op === 'stats') {
      reply(id, 'result', { value: model.stats() });
    } else if (op === 'encode') {
      reply(id, 'result', { value: model.encode(msg.text) });
    } else if (op === 'reload') {
      await model.reload();
      reply(id, 'result', { value: model.info });
    } else if (op === 'destroy-device-for-testing') {
      reply(id, 'result', { value: model.destroyDeviceForTesting() });
    } else if (op === 'unload') {
      model.unload();
      model = null;
      reply(id, 'result', { value: null });
    } else {
      throw pocketError(`unknown worker operation ${op}`, 'INVALID_ARGUMENT');
    }
  } catch (e) {
    fail(id, e);
  } finally {
    controllers.delete(id);
  }
}

self.onmessage = (e) => {
  handle(e.data);
};
