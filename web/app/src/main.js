// The chat app: state (body[data-state]: starting → idle → loading → ready ⇄ generating; error after
// a failed load), the model's load, the open conversation, sending / stopping /
// regenerating / editing, and the service worker. The pieces live in their own modules.
import './style.css';
import { backendWords, detailRows, getWorker, hasWebGPU, progressText, sourceWords, threadSupport } from './services/engine.js';
import { createPicker, localModel } from './components/picker.js';
import { renderMarkdown } from './components/markdown.js';
import { announce, renderMessages, scrollToEnd, streamReply } from './components/messages.js';
import { renderConversations, startRename } from './components/conversation-list.js';
import { showSettings, watchSettings } from './components/settings-form.js';
import { requestFields } from './stores/settings.js';
import * as store from './stores/conversations.js';
import { backendChoice, firstPersistAsk, modelSizes } from './stores/prefs.js';
import { byTestId as $ } from './components/dom.js';

const params = new URLSearchParams(location.search);

const app = {
  state: 'idle',
  model: null,
  conv: null,
  convs: [],
  stopper: null,
  /** The running generation (a Promise), so a switch or load can wait for it. */
  running: null,
  loadAbort: null,
  /** Index of the user message being edited (its text is in the composer), or null. */
  editing: null,
};
// For tests and the curious: the app's state and model, and the renderer model output
// goes through (an XSS test can feed it text directly).
window.pocketApp = app;
app.renderMarkdown = renderMarkdown;

function setState(state) {
  app.state = state;
  document.body.dataset.state = state;
  const reasons = {
    idle: 'Load a model to chat',
    loading: 'Loading the model…',
    error: 'The model did not load: see the error above, then load one again',
  };
  const reason = reasons[state] ?? '';
  $('composer-reason').textContent = reason;
  $('composer-reason').hidden = !reason;
  const noModel = state === 'idle' || state === 'loading' || state === 'error';
  $('prompt').disabled = noModel;
  $('send').disabled = state !== 'ready';
  $('stop').disabled = state !== 'generating';
  for (const b of document.querySelectorAll('[data-testid=edit], [data-testid=regenerate]')) b.disabled = state !== 'ready';
}

function showError(e) {
  const box = document.getElementById('error-box');
  box.hidden = false;
  $('error').textContent = `[${e?.code ?? 'ERROR'}] ${e?.message ?? e}`;
}
function clearError() {
  document.getElementById('error-box').hidden = true;
  $('error').textContent = '';
}

// ---- the model ----

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
    for (const id of store.pendingDeletes.take()) model.sessions.delete(id).catch(() => {});
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

// ---- conversations ----

async function refreshList() {
  app.convs = await store.listConversations();
  renderConversations(app.convs, app.conv?.id, openConversation);
}

function drawConversation() {
  document.getElementById('chat-title').textContent = app.conv.title;
  showSettings(app.conv.settings);
  renderMessages(app.conv.messages, {
    canAct: app.state === 'ready',
    onEdit: editMessage,
    onRegenerate: regenerate,
  });
}

/** Open conversation `id`: draw it, and put its snapshot into the KV cache (when a model is
 * loaded; a missing snapshot is fine: the next reply reads the whole conversation). */
async function openConversation(id) {
  if (app.conv?.id === id) return;
  await stop();
  const conv = await store.getConversation(id);
  if (!conv) return;
  app.conv = conv;
  app.editing = null;
  store.openId.set(id);
  drawConversation();
  renderConversations(app.convs, id, openConversation);
  if (app.model && conv.messages.length) {
    app.model.sessions.restore(id, { fallback: true }).catch(() => {});
  }
}

async function newChat() {
  await started;
  await stop();
  app.conv = store.newConversation(app.conv?.settings);
  await store.saveConversation(app.conv);
  store.openId.set(app.conv.id);
  app.editing = null;
  drawConversation();
  await refreshList();
  $('prompt').focus();
}

async function deleteChat() {
  await started;
  await stop();
  const id = app.conv.id;
  await store.deleteConversation(id);
  // Its snapshot goes too: now if a model is loaded, else after the next load (snapshots
  // are kept per model; the package reaches them only through a loaded one).
  if (app.model) app.model.sessions.delete(id).catch(() => {});
  else store.pendingDeletes.add(id);
  const rest = (await store.listConversations()).filter((c) => c.id !== id);
  if (rest.length) {
    app.conv = null;
    await refreshList();
    await openConversation(rest[0].id);
  } else {
    app.conv = null;
    await newChat();
  }
  announce('Conversation deleted');
}

// ---- chatting ----

/** The request's messages: the system prompt (if any), then the conversation. */
function history(conv) {
  const system = conv.settings.system.trim();
  const msgs = conv.messages.map((m) => ({ role: m.role, content: m.content }));
  return system ? [{ role: 'system', content: system }, ...msgs] : msgs;
}

/** Whether the open conversation's settings make a request (else the error is shown and
 * nothing changes: a JSON Schema that is not JSON). */
function settingsOk() {
  try {
    requestFields(app.conv.settings, app.model.info.context);
    return true;
  } catch (e) {
    showError(e);
    return false;
  }
}

/** Stream a reply to the conversation as it stands. */
async function reply() {
  const conv = app.conv;
  const model = app.model;
  const request = { messages: history(conv), ...requestFields(conv.settings, model.info.context) };
  const msg = { role: 'assistant', content: '' };
  conv.messages.push(msg);
  if (conv.title === 'New chat') conv.title = conv.messages.find((m) => m.role === 'user').content.slice(0, 48).trim() || 'New chat';
  document.getElementById('chat-title').textContent = conv.title;
  const views = renderMessages(conv.messages, { canAct: false, onEdit: editMessage, onRegenerate: regenerate });
  setState('generating');
  announce('The assistant is replying…');
  app.stopper = new AbortController();
  let done;
  app.running = new Promise((r) => (done = r));
  try {
    await streamReply(model, request, msg, views.at(-1), app.stopper.signal);
    announce(`Reply: ${msg.content.slice(0, 500)}`);
  } catch (e) {
    showError(e);
  } finally {
    await store.saveConversation(conv);
    // The conversation's snapshot (its KV rows), so a reload or a switch back needs no prefill.
    if (app.model === model) await model.sessions.save(conv.id).catch(() => {});
    app.stopper = null;
    done();
    app.running = null;
    if (app.state === 'generating') setState('ready');
    if (app.conv === conv) drawConversation();
    await refreshList();
  }
}

async function send(e) {
  e?.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || app.state !== 'ready' || !settingsOk()) return;
  clearError();
  const conv = app.conv;
  if (app.editing !== null) {
    conv.messages.length = app.editing;
    app.editing = null;
    document.getElementById('editing').hidden = true;
  }
  conv.messages.push({ role: 'user', content: text });
  $('prompt').value = '';
  autosize();
  await reply();
}

async function regenerate() {
  if (app.state !== 'ready' || !settingsOk()) return;
  const conv = app.conv;
  if (conv.messages.at(-1)?.role === 'assistant') conv.messages.pop();
  clearError();
  await reply();
}

function editMessage(index) {
  app.editing = index;
  $('prompt').value = app.conv.messages[index].content;
  document.getElementById('editing').hidden = false;
  autosize();
  $('prompt').focus();
}

/** Stop the reply being generated (if any) and wait until it has ended. */
async function stop() {
  app.stopper?.abort();
  await app.running;
}

function autosize() {
  const p = $('prompt');
  p.style.height = 'auto';
  p.style.height = `${Math.min(p.scrollHeight, 240)}px`;
}

// ---- wiring ----

const picker = createPicker({
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

// The backend: `?backend=` (a shareable link), else the last choice, else auto.
$('backend-choice').value = params.get('backend') ?? backendChoice.get() ?? 'auto';
$('backend-choice').onchange = () => backendChoice.set($('backend-choice').value);

document.getElementById('composer').onsubmit = send;
$('prompt').addEventListener('keydown', (e) => {
  // Enter sends (Shift+Enter: a new line), as in every chat app; not while composing text.
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) send(e);
});
$('prompt').addEventListener('input', autosize);
$('stop').onclick = () => stop();
$('new-chat').onclick = newChat;
$('delete-chat').onclick = deleteChat;
$('rename-chat').onclick = () =>
  startRename(app.conv.title, async (title) => {
    app.conv.title = title;
    document.getElementById('chat-title').textContent = title;
    await store.saveConversation(app.conv);
    await refreshList();
  });
$('search-chats').addEventListener('input', () => renderConversations(app.convs, app.conv?.id, openConversation));
document.getElementById('cancel-edit').onclick = () => {
  app.editing = null;
  $('prompt').value = '';
  document.getElementById('editing').hidden = true;
};
document.getElementById('dismiss-error').onclick = clearError;
watchSettings((settings) => {
  app.conv.settings = settings;
  store.saveConversation(app.conv, { touch: false });
});

if (!hasWebGPU()) {
  const note = document.getElementById('nogpu');
  note.hidden = false;
  note.textContent = 'WebGPU is not available in this browser: models run on the CPU backend (slower).';
}
document.getElementById('threads-note').textContent = threadSupport().reason;

// The open conversation (or a new one), then the cache's state, then the model when asked.
// (body[data-state] is "starting" in the HTML: "idle" says the controls work.)
setState('idle');
const started = (async () => {
  const convs = await store.listConversations();
  const id = store.openId.get();
  app.conv = convs.find((c) => c.id === id) ?? convs[0] ?? store.newConversation();
  if (!convs.length) await store.saveConversation(app.conv);
  store.openId.set(app.conv.id);
  drawConversation();
  await refreshList();
})();
await started;
picker.refresh();
if (params.get('model') && params.get('autoload') === '1') load(params.get('model'));
scrollToEnd();

// The service worker: the app opens offline after one visit (sw.js). Not in Vite's dev server.
// On a host that sends no COOP/COEP headers, the worker adds them: the page reloads once
// when the worker takes control, so it is cross-origin isolated (threads for the CPU backend).
if ('serviceWorker' in navigator && !import.meta.env.DEV) {
  navigator.serviceWorker.register('./sw.js').catch((e) => console.warn('pocketrt chat: no service worker:', e.message));
  if (!window.crossOriginIsolated && !sessionStorage.getItem('pocketrt-chat:isolating')) {
    navigator.serviceWorker.addEventListener('controllerchange', () => {
      if (app.state === 'loading' || app.state === 'generating') return;
      sessionStorage.setItem('pocketrt-chat:isolating', '1');
      location.reload();
    });
  }
}
