// Conversations in IndexedDB (through `idb`): each one is
// { id, title, created, updated, settings, messages: [{ role, content, reasoning?, stats? }] }.
// Saved whole after every change, so a reload or a killed tab loses at most the reply that
// was streaming. The open conversation's id, and the conversations whose snapshots are
// still to be deleted, are kept in localStorage. A store: it knows no page.
import { openDB } from 'idb';
import { defaultSettings } from './settings.js';

const dbp = openDB('pocketrt-chat', 1, {
  upgrade(db) {
    db.createObjectStore('conversations', { keyPath: 'id' }).createIndex('updated', 'updated');
  },
});

const OPEN = 'pocketrt-chat:open';

/** Every conversation, the most recently changed first. */
export async function listConversations() {
  const all = await (await dbp).getAllFromIndex('conversations', 'updated');
  return all.reverse();
}

export async function getConversation(id) {
  return (await dbp).get('conversations', id);
}

/** Store `conv` (a new one or a changed one), stamping `updated` when `touch`. */
export async function saveConversation(conv, { touch = true } = {}) {
  if (touch) conv.updated = Date.now();
  await (await dbp).put('conversations', structuredClone(conv));
  return conv;
}

export async function deleteConversation(id) {
  await (await dbp).delete('conversations', id);
}

/** A new, empty conversation (not stored until saved). `settings` carries over the
 * previous conversation's settings, so a new chat keeps the user's choices. */
export function newConversation(settings) {
  const now = Date.now();
  return {
    id: `c-${now.toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
    title: 'New chat',
    created: now,
    updated: now,
    settings: { ...defaultSettings(), ...settings },
    messages: [],
  };
}

export const openId = {
  get: () => localStorage.getItem(OPEN),
  set: (id) => localStorage.setItem(OPEN, id),
};

/** Conversations deleted while no model was loaded: their snapshots are deleted after the
 * next load. */
const PENDING = 'pocketrt-chat:pending-deletes';
export const pendingDeletes = {
  add(id) {
    localStorage.setItem(PENDING, JSON.stringify([...pendingDeletes.take(), id]));
  },
  take() {
    const ids = JSON.parse(localStorage.getItem(PENDING) ?? '[]');
    localStorage.removeItem(PENDING);
    return ids;
  },
};
