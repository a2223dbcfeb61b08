// The messages of the open conversation, drawn from its stored messages: a reply's thinking
// in a collapsed <details>, its text through markdown.js, its stats (tokens, time to first
// token, tok/s) under it; the last message's edit and the last reply's regenerate buttons.
// A streaming reply redraws its view (`update`) as it grows.
import { smallButton as button } from './dom.js';
import { renderMarkdown } from './markdown.js';

const list = () => document.getElementById('messages');

/** The stats line of a reply: `N tokens · TTFT X ms · Y tok/s`. */
export const statsText = (s) => `${s.tokens} tokens · TTFT ${Math.round(s.ttft)} ms · ${s.tps.toFixed(1)} tok/s`;

/** What the edit and regenerate buttons do: `edit(index)`, `regenerate()` (the chat
 * controller sets them once, `setMessageActions`). */
const actions = { edit: () => {}, regenerate: () => {} };

export function setMessageActions({ edit, regenerate }) {
  Object.assign(actions, { edit, regenerate });
}

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

/** Draw `messages` and return their views; the last user message gets `edit`, the last
 * reply `regenerate` (both disabled unless `canAct`). */
export function renderMessages(messages, { canAct }) {
  const views = messages.map(messageView);
  const lastUser = messages.findLastIndex((m) => m.role === 'user');
  const lastReply = messages.length - 1;
  views.forEach((v, i) => {
    if (i === lastUser) v.foot.append(button('edit', 'Edit', 'Edit your last message and send it again', () => actions.edit(i)));
    if (i === lastReply && messages[i].role === 'assistant') {
      v.foot.append(button('regenerate', 'Regenerate', 'Regenerate the last reply', () => actions.regenerate()));
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
