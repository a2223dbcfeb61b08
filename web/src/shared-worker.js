// The SharedWorker that hosts a model for every tab of the origin (host.js): one per
// model (its name is shared.js's CHANNEL and the model's key); each tab is a port.
import { EngineHost } from './host.js';

const ports = new Map();
const host = new EngineHost({
  via: 'shared-worker',
  post: (client, msg) => ports.get(client)?.postMessage(msg),
  left: (client) => ports.delete(client),
});

self.onconnect = (e) => {
  const port = e.ports[0];
  port.onmessage = ({ data }) => {
    ports.set(data.from, port);
    if (data.op === 'who') port.postMessage({ ...host.hello, to: data.from });
    else host.receive(data.from, data);
  };
};
