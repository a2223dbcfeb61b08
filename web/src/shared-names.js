// The names the tabs sharing a model (shared.js) and its host (host.js,
// leader-worker.js, shared-worker.js) meet under. A module of its own: a leader
// candidate waiting for its lock loads nothing more.

/** Web Lock a tab holds while it lives (the host hears of its end by asking for it). */
export const CLIENT_LOCK = 'pocketrt-client:';
/** Web Lock the leader's Worker holds while it hosts a model. */
export const HOST_LOCK = 'pocketrt-host:';
/** BroadcastChannel (leader) and SharedWorker name of a model. */
export const CHANNEL = 'pocketrt-shared:';
