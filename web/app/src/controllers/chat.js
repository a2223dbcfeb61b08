// The chat: the composer's text sent, a reply streamed into the open conversation (OpenAI's
// chat.completions.create with stream: true; thinking apart; per-reply stats), stop,
// regenerate the last reply, edit-and-resend the last message. After each reply the
// conversation is saved, with its session snapshot (its KV rows).
import { app, setState, stop } from '../stores/app.js';
import { saveConversation } from '../stores/conversations.js';
import { requestFields } from '../stores/settings.js';
import { renderMessages, scrollToEnd, setMessageActions } from '../components/messages.js';
import { announce, clearError, showError } from '../components/status.js';
import { byTestId as $ } from '../components/dom.js';
import { drawConversation, refreshList } from './conversations.js';

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
  const views = renderMessages(conv.messages, { canAct: false });
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
    await saveConversation(conv);
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

/** Stream the reply to `request` into `msg` (an assistant message, drawn by `view`).
 * Resolves when the reply ends: finished, stopped (`signal`; not an error) or failed
 * (thrown). `msg.stats` gets the reply's stats. */
async function streamReply(model, request, msg, view, signal) {
  const t0 = performance.now();
  let first = null;
  let count = 0;
  let usage = null;
  let finish = null;
  try {
    const stream = await model.chat.completions.create(
      { ...request, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      const d = choice?.delta ?? {};
      if (d.reasoning_content) msg.reasoning = (msg.reasoning ?? '') + d.reasoning_content;
      if (d.content) msg.content += d.content;
      if (d.content != null || d.reasoning_content != null) {
        first ??= performance.now();
        count += 1;
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
      view.update();
      scrollToEnd(false);
    }
  } catch (e) {
    if (e.code !== 'ABORTED' && e.name !== 'AbortError' && !signal.aborted) throw e;
    finish = 'stopped';
  } finally {
    const end = performance.now();
    const tokens = usage?.completion_tokens ?? count;
    const ttft = (first ?? end) - t0;
    const secs = (end - (first ?? t0)) / 1000;
    msg.stats = { tokens, ttft, tps: secs > 0 ? Math.max(tokens - 1, 0) / secs : 0, finish };
    view.update(true);
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

/** Put the user message at `index` into the composer: sending replaces it and what followed. */
function editMessage(index) {
  app.editing = index;
  $('prompt').value = app.conv.messages[index].content;
  document.getElementById('editing').hidden = false;
  autosize();
  $('prompt').focus();
}

function cancelEdit() {
  app.editing = null;
  $('prompt').value = '';
  document.getElementById('editing').hidden = true;
}

/** The composer grows with its text, up to 240 px. */
function autosize() {
  const p = $('prompt');
  p.style.height = 'auto';
  p.style.height = `${Math.min(p.scrollHeight, 240)}px`;
}

/** Wire the composer (send, Enter, stop, cancel an edit) and the messages' buttons. */
export function wireChat() {
  setMessageActions({ edit: editMessage, regenerate });
  document.getElementById('composer').onsubmit = send;
  $('prompt').addEventListener('keydown', (e) => {
    // Enter sends (Shift+Enter: a new line), as in every chat app; not while composing text.
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) send(e);
  });
  $('prompt').addEventListener('input', autosize);
  $('stop').onclick = () => stop();
  document.getElementById('cancel-edit').onclick = cancelEdit;
}
