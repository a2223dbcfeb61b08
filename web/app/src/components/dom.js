// The app's DOM helpers: an element by its `data-testid` (the hooks every module and the
// tests use), and the small labelled buttons messages, code blocks and models carry.

/** The element whose `data-testid` is `id`. */
export const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);

/** A `<button type=button>` with hook `testid`, visible `text`, accessible name `label`,
 * the classes `className` and `onClick`. */
export function smallButton(testid, text, label, onClick, className = 'small quiet') {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = className;
  b.dataset.testid = testid;
  b.textContent = text;
  b.setAttribute('aria-label', label);
  b.onclick = onClick;
  return b;
}
