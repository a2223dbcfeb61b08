// What the app remembers between visits in localStorage, besides its conversations: the
// backend last chosen, whether persistent storage was asked for, and the size of each
// model seen loading (shown for models not cached). A store: it knows no page.

const BACKEND = 'pocketrt-chat:backend';
const PERSIST_ASKED = 'pocketrt-chat:persist-asked';
const SIZES = 'pocketrt-chat:sizes';

/** "Run on": auto, webgpu or cpu (null before the first choice). */
export const backendChoice = {
  get: () => localStorage.getItem(BACKEND),
  set: (choice) => localStorage.setItem(BACKEND, choice),
};

/** True on the first call ever on this device, false after: persistent storage is asked
 * for once (the first load). */
export function firstPersistAsk() {
  const first = !localStorage.getItem(PERSIST_ASKED);
  localStorage.setItem(PERSIST_ASKED, '1');
  return first;
}

/** Sizes seen while loading (the first progress event's total), by model id or URL. */
export const modelSizes = {
  all: () => JSON.parse(localStorage.getItem(SIZES) ?? '{}'),
  remember(id, bytes) {
    const sizes = modelSizes.all();
    sizes[id] = bytes;
    localStorage.setItem(SIZES, JSON.stringify(sizes));
  },
};
