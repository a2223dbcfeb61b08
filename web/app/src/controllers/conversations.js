// The conversations: the app's start (the conversation open at the last visit, or a new
// one), the list (search, open, new, rename, delete), the open one drawn (title, settings,
// messages) and its settings saved as they change. Each conversation's KV cache is a
// session snapshot named by its id: opening one restores it into a loaded model, deleting
// one deletes it (after the next load when no model is loaded).
import { app, stop } from '../stores/app.js';
import * as store from '../stores/conversations.js';
import { renderConversations, startRename } from '../components/conversation-list.js';
import { renderMessages } from '../components/messages.js';
import { showSettings, watchSettings } from '../components/settings-form.js';
import { announce } from '../components/status.js';
import { byTestId as $ } from '../components/dom.js';

let begin;
/** Resolves once the app has opened its first conversation (`start`): a load restores the
 * open conversation's snapshot, so it waits for this. */
export const started = new Promise((resolve) => (begin = resolve));

/** Open the conversation open at the last visit (or the newest, or a new one) and draw the
 * list. */
export function start() {
  begin(
    (async () => {
      const convs = await store.listConversations();
      const id = store.openId.get();
      app.conv = convs.find((c) => c.id === id) ?? convs[0] ?? store.newConversation();
      if (!convs.length) await store.saveConversation(app.conv);
      store.openId.set(app.conv.id);
      drawConversation();
      await refreshList();
    })(),
  );
  return started;
}

/** Read the list again and draw it. */
export async function refreshList() {
  app.convs = await store.listConversations();
  renderConversations(app.convs, app.conv?.id, openConversation);
}

/** Draw the open conversation: its title, settings and messages. */
export function drawConversation() {
  document.getElementById('chat-title').textContent = app.conv.title;
  showSettings(app.conv.settings);
  renderMessages(app.conv.messages, { canAct: app.state === 'ready' });
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

function rename() {
  startRename(app.conv.title, async (title) => {
    app.conv.title = title;
    document.getElementById('chat-title').textContent = title;
    await store.saveConversation(app.conv);
    await refreshList();
  });
}

/** Wire the list's controls and the settings form. */
export function wireConversations() {
  $('new-chat').onclick = newChat;
  $('delete-chat').onclick = deleteChat;
  $('rename-chat').onclick = rename;
  $('search-chats').addEventListener('input', () => renderConversations(app.convs, app.conv?.id, openConversation));
  watchSettings((settings) => {
    app.conv.settings = settings;
    store.saveConversation(app.conv, { touch: false });
  });
}
