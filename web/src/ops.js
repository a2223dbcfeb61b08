// The operations a model answers over messages: what worker.js runs for its page, and
// host.js for every tab sharing one engine. `reply(type, fields)` sends a message of
// the call (progress, token, piece, begun, chunk; `result` last); errors are thrown.
import { pocketError } from './core.js';

/** What `model.sessions` offers through op "sessions". */
export const SESSION_METHODS = ['save', 'restore', 'list', 'delete', 'export', 'import'];

/** The ops that run a generation or change the conversation the KV cache holds. */
export const CONVERSATION_OPS = new Set(['generate', 'chat', 'completion', 'sessions']);

/** Run `msg.op` on `model`; `signal` aborts a generation. */
export async function runOp(model, msg, reply, signal) {
  const { op } = msg;
  if (op === 'generate' || op === 'chat') {
    const options = { ...msg.options, signal, onToken: (p) => reply('token', { piece: p }) };
    const stream = op === 'chat' ? model.chat(msg.messages, options) : model.generate(msg.prompt, options);
    for await (const text of stream) reply('piece', { text });
    reply('result', { value: model.stats() });
  } else if (op === 'completion') {
    const api = msg.kind === 'chat' ? model.chat.completions : model.completions;
    const out = await api.create(msg.request, { signal });
    if (msg.request.stream) {
      reply('begun');
      for await (const chunk of out) reply('chunk', { chunk });
      reply('result', { value: null });
    } else {
      reply('result', { value: out });
    }
  } else if (op === 'embeddings') {
    reply('result', { value: await model.embeddings.create(msg.request) });
  } else if (op === 'sessions') {
    if (!SESSION_METHODS.includes(msg.method)) throw pocketError(`unknown sessions method ${msg.method}`, 'INVALID_ARGUMENT');
    reply('result', { value: await model.sessions[msg.method](...msg.args) });
  } else if (op === 'stats') {
    reply('result', { value: model.stats() });
  } else if (op === 'encode') {
    reply('result', { value: model.encode(msg.text) });
  } else if (op === 'gpu-bytes') {
    reply('result', { value: model.gpuBytes() });
  } else if (op === 'destroy-device-for-testing') {
    reply('result', { value: model.destroyDeviceForTesting() });
  } else {
    throw pocketError(`unknown worker operation ${op}`, 'INVALID_ARGUMENT');
  }
}

/** The message that tells a page its model's device was lost (`onDeviceLost`'s event;
 * `reloading` instead of the reload's Promise). */
export function deviceLostMessage({ reason, message, reload }) {
  return { type: 'device-lost', info: { reason, message, reloading: !!reload } };
}

/** The message of an autoSave's report or error (`onAutoSave`'s event; the error as
 * { message, code }). */
export function autoSaveMessage({ id, report, error }) {
  return { type: 'autosave', event: { id, report, error: error && { message: error.message, code: error.code } } };
}

/** An error as the fields of an `error` message: an API error keeps OpenAI's shape
 * (`error`) and its status across the message. */
export function errorFields(e) {
  const openai = e?.error ? { error: e.error } : undefined;
  return { message: String(e?.message ?? e), code: e?.code ?? 'INTERNAL', openai, status: e?.status };
}

/** The load options that cross a message (functions and signals stay behind). */
export function plainOptions(options) {
  const out = {};
  for (const [k, v] of Object.entries(options ?? {})) {
    if (typeof v !== 'function' && !(globalThis.AbortSignal && v instanceof AbortSignal)) out[k] = v;
  }
  return out;
}
