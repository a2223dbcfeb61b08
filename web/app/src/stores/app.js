// The app's state in memory: where it stands (`state`: idle → loading → ready ⇄ generating;
// error after a failed load), the loaded model, the open conversation and the list, the
// reply being generated and the load under way. The controllers change it; the page
// follows `state` through `onState` (main.js hands it the status component). A store: it
// knows no page.

export const app = {
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

const watchers = [];

/** Call `draw(state)` at every change of state. */
export function onState(draw) {
  watchers.push(draw);
}

export function setState(state) {
  app.state = state;
  for (const draw of watchers) draw(state);
}

/** Stop the reply being generated (if any) and wait until it has ended. */
export async function stop() {
  app.stopper?.abort();
  await app.running;
}
