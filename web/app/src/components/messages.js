// The messages of the open conversation: drawn from its stored messages, and a reply
// streamed into a new one (`streamReply`: OpenAI's chat.completions.create with
// stream: true). A reply's thinking goes into a collapsed <details>, its text through
// markdown.js, and its stats (tokens, time to first token, tok/s) under it.
import { smallButton as button } from './dom.js';
import { renderMarkdown } from './markdown.js';

const list = () => document.getElementById('messages');

/** The stats line of a reply: `N tokens · TTFT X ms · Y tok/s`. */
export const statsText = (s) => `${s.tokens} tokens · TTFT ${Math.round(s.ttft)} ms · ${s.tps.toFixed(1)} tok/s`;


/** A message's element and `update(msg)`, which redraws its content (markdown re-rendered
 * at most once a frame while a reply streams). */
function messageView(msg) {
  const el = document.createElement('article');
  el.className = `msg ${msg.role}`;
  el.dataset.testid = 'message';
  el.dataset.role = msg.role;
  el.setAttribute('aria-label', msg.role === 'user' ? 'You' : 'Assistant');
  const thinking = document.createElement('details');
  thinking.dataset.testid = 'thinking';
  thinking.className = 'thinking';
  thinking.hidden = true;
  const summary = document.createElement('summary');
  summary.textContent = 'Thinking';
  const thought = document.createElement('div');
  thought.className = 'thought';
  thinking.append(summary, thought);
  const body = document.createElement('div');
  body.className = 'msg-body';
  body.dataset.testid = 'message-body';
  const foot = document.createElement('div');
  foot.className = 'msg-foot';
  el.append(thinking, body, foot);
  let frame = 0;
  const draw = () => {
    frame = 0;
    if (msg.role === 'assistant') renderMarkdown(body, msg.content);
    else body.textContent = msg.content;
    thinking.hidden = !msg.reasoning;
    thought.textContent = msg.reasoning ?? '';
    if (msg.stats && !foot.querySelector('[data-testid=reply-stats]')) {
      const stats = document.createElement('span');
      stats.className = 'stats';
      stats.dataset.testid = 'reply-stats';
      stats.textContent = statsText(msg.stats);
      if (msg.stats.finish) stats.title = `finished: ${msg.stats.finish}`;
      foot.prepend(stats);
    }
  };
  draw();
  return {
    el,
    foot,
    update: (now = false) => {
      if (now) {
        cancelAnimationFrame(frame);
        draw();
      } else {
        frame ||= requestAnimationFrame(draw);
      }
    },
  };
}

/** Draw `messages`; the last user message gets `edit`, the last reply `regenerate`
 * (both disabled unless `canAct`). */
export function renderMessages(messages, { canAct, onEdit, onRegenerate }) {
  const views = messages.map(messageView);
  const lastUser = messages.findLastIndex((m) => m.role === 'user');
  const lastReply = messages.length - 1;
  views.forEach((v, i) => {
    if (i === lastUser) v.foot.append(button('edit', 'Edit', 'Edit your last message and send it again', () => onEdit(i)));
    if (i === lastReply && messages[i].role === 'assistant') {
      v.foot.append(button('regenerate', 'Regenerate', 'Regenerate the last reply', onRegenerate));
    }
  });
  const empty = document.getElementById('empty');
  empty.hidden = messages.length > 0;
  list().replaceChildren(...views.map((v) => v.el));
  for (const b of list().querySelectorAll('[data-testid=edit], [data-testid=regenerate]')) b.disabled = !canAct;
  scrollToEnd();
  return views;
}

/** Keep the newest message in view (unless the reader scrolled up). */
export function scrollToEnd(force = true) {
  const scroller = document.scrollingElement.scrollHeight > innerHeight + 4 && getComputedStyle(list()).overflowY === 'visible'
    ? document.scrollingElement
    : list();
  const near = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  if (force || near) scroller.scrollTop = scroller.scrollHeight;
}

/** Stream a reply to `history` (OpenAI messages) into `msg` (an assistant message already
 * in `views`' last place). Resolves when the reply ends: finished, stopped (`signal`;
 * not an error) or failed (thrown). `msg.stats` gets the reply's stats. */
export async function streamReply(model, request, msg, view, signal) {
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

/** Show `text` to screen readers (the live region). */
export function announce(text) {
  const live = document.getElementById('live');
  live.textContent = '';
  requestAnimationFrame(() => (live.textContent = text));
}
