// A tab's candidate to host a shared model where no SharedWorker can (shared.js): it
// waits for the model's Web Lock; holding it, it hosts the engine (host.js) for every tab
// over the model's BroadcastChannel until its tab closes, which frees the lock for the
// next tab's candidate.
import { CHANNEL, HOST_LOCK } from './shared-names.js';

self.onmessage = ({ data }) => {
  navigator.locks.request(HOST_LOCK + data.key, async () => {
    // Imported only once elected: a waiting candidate holds no engine code.
    const { EngineHost } = await import('./host.js');
    const channel = new BroadcastChannel(CHANNEL + data.key);
    const post = (client, msg) => channel.postMessage({ ...msg, to: client });
    const host = new EngineHost({ via: 'leader', post, tab: data.tab });
    channel.onmessage = ({ data: m }) => {
      if (m.to !== 'host') return;
      if (m.op === 'who') channel.postMessage({ ...host.hello, to: m.from });
      else host.receive(m.from, m);
    };
    channel.postMessage({ ...host.hello, to: '*' });
    await new Promise(() => {}); // hosts until the tab closes
  });
};
