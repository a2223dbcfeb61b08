// The model: the picker (components/picker.js) hands an id, a URL or local files to `load`,
// which runs them in the engine's Worker (services/engine.js) on the backend chosen, shows
// the load's progress, then what was loaded (backend and device, source, the details
// panel), restoring the open conversation's session snapshot into the KV cache. The link
// may choose: `?model=` (loaded at once with `&autoload=1`), `&backend=`, `&profile=`,
// `&hub=`.
import { app, setState, stop } from '../stores/app.js';
import { pendingDeletes } from '../stores/conversations.js';
import { backendChoice, firstPersistAsk, modelSizes } from '../stores/prefs.js';
import { backendWords, detailRows, getWorker, hasWebGPU, progressText, sourceWords, threadSupport } from '../services/engine.js';
import { createPicker, localModel } from '../components/picker.js';
import { announce, clearError, showError } from '../components/status.js';
import { byTestId as $ } from '../components/dom.js';
import { started } from './conversations.js';

const params = new URLSearchParams(location.search);

/** The picker (`wireModels` makes it). */
let picker = null;

/** Load `url` (a hub id, package or GGUF URL; `extra`: the local files) in the Worker,
 * restoring the open conversation's session snapshot into the KV cache. */
async function load(url, extra = {}, label = url) {
  await started; // the open conversation (its snapshot is restored with the model)
  clearError();
  app.loadAbort?.abort();
  await stop();
  const abort = (app.loadAbort = new AbortController());
  app.model = null;
  setState('loading');
  document.getElementById('load-progress').hidden = false;
  $('backend').textContent = '';
  const text = progressText();
  let sized = false;
  const options = {
    backend: $('backend-choice').value,
    profile: params.get('profile') ?? undefined,
    hubEndpoint: params.get('hub') ?? undefined,
    persist: firstPersistAsk(),
    // A long conversation drops its oldest turns rather than failing with CONTEXT_FULL.
    contextOverflow: 'truncate',
    autoReload: true,
    signal: abort.signal,
    onDeviceLost: () => ($('load-status').textContent = 'The GPU was reset: reloading the model…'),
    onProgress: (ev) => {
      if (abort.signal.aborted) return;
      const bar = document.getElementById('load-progress');
      bar.max = ev.total || 1;
      bar.value = ev.loaded;
      $('load-status').textContent = text(ev);
      if (!sized && ev.total && !extra.files) {
        sized = true;
        modelSizes.remember(url, ev.total);
      }
    },
    ...extra,
  };
  const worker = getWorker();
  try {
    let model;
    try {
      model = await worker.load(url, { ...options, restore: { id: app.conv.id, fallback: true } });
    } catch (e) {
      if (!e.code?.startsWith('SESSION_')) throw e;
      // A snapshot this model cannot take (another tokenizer or version): start afresh.
      model = await worker.load(url, options);
      await model.sessions.delete(app.conv.id).catch(() => {});
    }
    if (abort.signal.aborted) return;
    app.model = model;
    app.modelLabel = label;
    const i = model.info;
    document.body.dataset.backend = i.backend;
    const r = model.restored;
    const restored = r && r.tokens ? ` · chat restored (${r.tokens} tokens, ${r.prefilled ? 'prefilled' : 'no prefill'})` : '';
    const source = extra.files ? 'from this device' : sourceWords(i);
    $('load-status').textContent = `Ready · ${label} · ${backendWords(i)} · ${source}${restored}`;
    $('backend').textContent = backendWords(i);
    document.getElementById('load-progress').hidden = true;
    setState('ready');
    // On a phone (one column) the chat is below the picker: bring it into view.
    if (matchMedia('(max-width: 759px)').matches) document.getElementById('composer').scrollIntoView({ block: 'end' });
    announce(`Model ready on ${backendWords(i)}`);
    fillDetails(model);
    for (const id of pendingDeletes.take()) model.sessions.delete(id).catch(() => {});
  } catch (e) {
    if (abort.signal.aborted) return;
    document.getElementById('load-progress').hidden = true;
    $('load-status').textContent = 'Not loaded';
    showError(e);
    setState('error');
  } finally {
    if (app.loadAbort === abort) app.loadAbort = null;
    picker.refresh();
  }
}

async function fillDetails(model) {
  const rows = await detailRows(model);
  const dl = document.getElementById('details-list');
  dl.replaceChildren(
    ...rows.flatMap(([k, v]) => {
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = v;
      return [dt, dd];
    }),
  );
}

/** Wire the picker, "Run on" (`&backend=`, else the last choice, else auto) and the notes
 * on what this browser runs (WebGPU, threads). */
export function wireModels() {
  picker = createPicker({
    worker: getWorker,
    initial: params.get('model') ?? undefined,
    onLoad: (id) => load(id),
    onLocal: (files) => {
      try {
        const m = localModel(files);
        load(m.url, { files: m.files, cache: false }, m.label);
      } catch (e) {
        showError(e);
      }
    },
    onError: showError,
  });
  $('backend-choice').value = params.get('backend') ?? backendChoice.get() ?? 'auto';
  $('backend-choice').onchange = () => backendChoice.set($('backend-choice').value);
  if (!hasWebGPU()) {
    const note = document.getElementById('nogpu');
    note.hidden = false;
    note.textContent = 'WebGPU is not available in this browser: models run on the CPU backend (slower).';
  }
  document.getElementById('threads-note').textContent = threadSupport().reason;
}

/** Once a conversation is open: the cache's state, then the link's model when it asks
 * (`?model=…&autoload=1`). */
export function showModels() {
  picker.refresh();
  if (params.get('model') && params.get('autoload') === '1') load(params.get('model'));
}
