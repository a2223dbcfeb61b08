// The pocketrt Worker: holds one model and runs it off the page's thread. Spoken to by
// worker-client.js (messages {id, op, ...}; replies {id, type, ...}); the operations on a
// loaded model are ops.js's.
import { Pocket, pocketError } from './core.js';
import { autoSaveMessage, deviceLostMessage, errorFields, runOp } from './ops.js';

let model = null;
const controllers = new Map();

function reply(id, type, fields = {}) {
  self.postMessage({ id, type, ...fields });
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
        // Told to the page as messages of their own (the load's call is over by then).
        onDeviceLost: (event) => self.postMessage(deviceLostMessage(event)),
        onAutoSave: (event) => self.postMessage(autoSaveMessage(event)),
      });
      reply(id, 'result', { value: { info: model.info, restored: model.restored } });
    } else if (op === 'cache') {
      reply(id, 'result', { value: await Pocket.cache[msg.method](msg.url, msg.base) });
    } else if (!model) {
      throw pocketError('no model is loaded in the worker', 'UNLOADED');
    } else if (op === 'reload') {
      await model.reload();
      reply(id, 'result', { value: model.info });
    } else if (op === 'unload') {
      model.unload();
      model = null;
      reply(id, 'result', { value: null });
    } else {
      await runOp(model, msg, (type, fields) => reply(id, type, fields), signal);
    }
  } catch (e) {
    reply(id, 'error', errorFields(e));
  } finally {
    controllers.delete(id);
  }
}

self.onmessage = (e) => {
  handle(e.data);
};
