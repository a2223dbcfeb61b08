// The page's status: the composer and the message buttons as the state allows
// (body[data-state]), the error banner (`[CODE] message`), and the live region that
// screen readers hear.
import { byTestId as $ } from './dom.js';

/** Why the composer is off, by state. */
const REASONS = {
  idle: 'Load a model to chat',
  loading: 'Loading the model…',
  error: 'The model did not load: see the error above, then load one again',
};

/** Draw `state`: body[data-state], the composer's reason and which controls work. */
export function drawState(state) {
  document.body.dataset.state = state;
  const reason = REASONS[state] ?? '';
  $('composer-reason').textContent = reason;
  $('composer-reason').hidden = !reason;
  const noModel = state === 'idle' || state === 'loading' || state === 'error';
  $('prompt').disabled = noModel;
  $('send').disabled = state !== 'ready';
  $('stop').disabled = state !== 'generating';
  for (const b of document.querySelectorAll('[data-testid=edit], [data-testid=regenerate]')) b.disabled = state !== 'ready';
}

export function showError(e) {
  const box = document.getElementById('error-box');
  box.hidden = false;
  $('error').textContent = `[${e?.code ?? 'ERROR'}] ${e?.message ?? e}`;
}

export function clearError() {
  document.getElementById('error-box').hidden = true;
  $('error').textContent = '';
}

/** Show `text` to screen readers (the live region). */
export function announce(text) {
  const live = document.getElementById('live');
  live.textContent = '';
  requestAnimationFrame(() => (live.textContent = text));
}
