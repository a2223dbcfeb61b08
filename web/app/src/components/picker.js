// The model picker: the suggested models by hub id (MNN-Pocket-0.3B first), the `?model=`
// one, and every model in the package's cache; each with its size, whether it is cached,
// and a delete button when it is. A URL / hub id box, a local GGUF file and a local
// package folder. Storage used / available under the list. The cache is read through the
// Worker (`worker.cache`: the same Cache Storage as the page); sizes seen while loading
// come from stores/prefs.js.
import { byTestId as $, smallButton } from './dom.js';
import { size } from '../services/engine.js';
import { modelSizes } from '../stores/prefs.js';

/** Small models by hub id (Qwen3, Qwen2 and Llama architectures). */
export const SUGGESTED = [
  { id: 'taobao-mnn/MNN-Pocket-0.3B-GGUF', name: 'MNN-Pocket 0.3B', note: 'Qwen3, 4-bit · fast, the default' },
  { id: 'Qwen/Qwen2.5-0.5B-Instruct-GGUF', name: 'Qwen2.5 0.5B Instruct', note: 'Qwen2 · general chat' },
  { id: 'Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF', name: 'Qwen2.5 Coder 0.5B', note: 'Qwen2 · code' },
  { id: 'Qwen/Qwen3-0.6B-GGUF', name: 'Qwen3 0.6B', note: 'Qwen3 · thinking' },
  { id: 'unsloth/Llama-3.2-1B-Instruct-GGUF', name: 'Llama 3.2 1B Instruct', note: 'Llama · larger, slower' },
];

/** A hub id (`owner/name`), as the package reads one: not a URL, not `./` or `/`. */
export const isHubId = (s) => /^[\w.-]+\/[\w.-]+$/.test(s) && !s.startsWith('.');

/** The name the package caches `id` under: a hub id as it is, else the absolute URL. */
const cacheName = (id) => (isHubId(id) ? id : new URL(id, location.href).href);

/** The picker. `worker()` gives the PocketWorker; `onLoad(id)` loads a model by id / URL;
 * `onLocal(files)` loads local files; `onError(e)` shows an error. */
export function createPicker({ worker, onLoad, onLocal, onError, initial }) {
  const list = document.getElementById('models');
  const input = $('model-url');
  const extra = initial && !SUGGESTED.some((m) => m.id === initial) ? [{ id: initial, name: initial, note: 'from the link' }] : [];
  input.value = initial ?? SUGGESTED[0].id;
  let cached = [];

  function render() {
    const byName = new Map(cached.map((c) => [c.url.replace(/\/$/, ''), c]));
    const entries = [...SUGGESTED, ...extra];
    const known = new Set(entries.map((m) => cacheName(m.id).replace(/\/$/, '')));
    for (const c of cached) {
      if (!known.has(c.url.replace(/\/$/, ''))) entries.push({ id: c.url, name: c.url.replace(location.origin, ''), note: 'cached' });
    }
    const sizes = modelSizes.all();
    list.replaceChildren(
      ...entries.map((m) => {
        const c = byName.get(cacheName(m.id).replace(/\/$/, ''));
        const bytes = c?.totalBytes ?? sizes[m.id];
        const li = document.createElement('li');
        li.className = 'model';
        li.dataset.testid = 'model-option';
        li.dataset.model = m.id;
        li.dataset.cached = String(!!c?.complete);
        if (bytes) li.dataset.size = String(bytes);
        const label = document.createElement('label');
        const radio = document.createElement('input');
        radio.type = 'radio';
        radio.name = 'model';
        radio.value = m.id;
        radio.checked = input.value === m.id;
        radio.onchange = () => (input.value = m.id);
        const text = document.createElement('span');
        text.className = 'model-text';
        const name = document.createElement('strong');
        name.textContent = m.name;
        const meta = document.createElement('small');
        const state = c ? (c.complete ? 'cached' : `partly cached (${size(c.bytes)})`) : 'not cached';
        meta.textContent = [m.note, bytes && size(bytes), state].filter(Boolean).join(' · ');
        text.append(name, meta);
        label.append(radio, text);
        li.append(label);
        if (c) {
          const del = smallButton('delete-model', 'Delete', `Delete ${m.name} from this device`, async () => {
            del.disabled = true;
            try {
              await worker().cache.delete(c.url);
            } catch (e) {
              onError(e);
            }
            await refresh();
          });
          li.append(del);
        }
        return li;
      }),
    );
  }

  /** Read the cache and storage again and redraw. */
  async function refresh() {
    try {
      const [models, usage] = await Promise.all([worker().cache.list(), worker().cache.usage()]);
      cached = models;
      const parts = [`Models ${size(usage.models)}`];
      if (usage.sessions) parts.push(`chats ${size(usage.sessions)}`);
      if (usage.usage !== null) parts.push(`${size(usage.usage)} used of ${size(usage.quota)} available`);
      $('storage').textContent = `Storage: ${parts.join(' · ')}`;
    } catch (e) {
      $('storage').textContent = `Storage: unknown (${e.message})`;
    }
    render();
  }

  // Typing an id or URL unselects the list's entries that it no longer names.
  input.addEventListener('input', () => {
    for (const r of list.querySelectorAll('input[type=radio]')) r.checked = r.value === input.value.trim();
  });
  $('load').onclick = () => {
    const id = input.value.trim();
    if (id) onLoad(id);
    else onError(Object.assign(new Error('choose a model, or type its URL or hub id'), { code: 'INVALID_ARGUMENT' }));
  };
  for (const id of ['local-file', 'local-folder']) {
    $(id).onchange = (e) => {
      if (e.target.files.length) onLocal(e.target.files);
      e.target.value = '';
    };
  }
  render();
  return { refresh, selected: () => input.value.trim() };
}

/** Local files as the package's `files` option (name → blob URL) and the URL to load:
 * a package folder needs its manifest.json; otherwise the first .gguf. */
export function localModel(files) {
  const urls = {};
  // A folder's own files only (a subfolder's manifest.json must not replace its own).
  for (const f of files) {
    if ((f.webkitRelativePath || f.name).split('/').length <= 2) urls[f.name] = URL.createObjectURL(f);
  }
  if (urls['manifest.json']) return { url: 'local', files: urls, label: files[0].webkitRelativePath?.split('/')[0] || 'local package' };
  const gguf = Object.keys(urls).find((n) => n.toLowerCase().endsWith('.gguf'));
  if (gguf) return { url: gguf, files: urls, label: gguf };
  throw Object.assign(new Error('choose a pocket package folder (with manifest.json) or a .gguf file'), { code: 'INVALID_ARGUMENT' });
}
