// The conversation list: every stored conversation (newest first), filtered by the search
// box (title and text), the open one marked aria-current; the title renamed in place. What
// a pick or a rename does is the conversations controller's (the callbacks it gives).
import { byTestId as $ } from './dom.js';

/** Draw `convs` into the list, `openId` marked; `onOpen(id)` when one is picked. */
export function renderConversations(convs, openId, onOpen) {
  const q = $('search-chats').value.trim().toLowerCase();
  const shown = q
    ? convs.filter((c) => c.title.toLowerCase().includes(q) || c.messages.some((m) => m.content.toLowerCase().includes(q)))
    : convs;
  const ul = document.getElementById('chats');
  ul.replaceChildren(
    ...shown.map((c) => {
      const li = document.createElement('li');
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'chat-entry';
      b.dataset.testid = 'conversation';
      b.dataset.id = c.id;
      if (c.id === openId) b.setAttribute('aria-current', 'true');
      const title = document.createElement('span');
      title.className = 'chat-title';
      title.textContent = c.title;
      const when = document.createElement('small');
      when.textContent = `${c.messages.length} message${c.messages.length === 1 ? '' : 's'} · ${new Date(c.updated).toLocaleString([], { dateStyle: 'short', timeStyle: 'short' })}`;
      b.append(title, when);
      b.onclick = () => onOpen(c.id);
      li.append(b);
      return li;
    }),
  );
  document.getElementById('no-chats').hidden = shown.length > 0;
}

/** Rename in place: the title becomes an input (testid rename-input); Enter or leaving it
 * commits, Escape cancels. Calls `onRename(title)` with a non-empty new title. */
export function startRename(current, onRename) {
  const title = document.getElementById('chat-title');
  const input = $('rename-input');
  input.value = current;
  title.hidden = true;
  input.hidden = false;
  input.focus();
  input.select();
  let done = false;
  const finish = (commit) => {
    if (done) return;
    done = true;
    input.hidden = true;
    title.hidden = false;
    const value = input.value.trim();
    if (commit && value && value !== current) onRename(value);
  };
  input.onkeydown = (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      finish(true);
    } else if (e.key === 'Escape') {
      finish(false);
    }
  };
  input.onblur = () => finish(true);
}
