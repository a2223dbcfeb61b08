// A small static server for the chat app and the browser tests. Routes:
//   /pkg/...      the built npm package (../../pkg, or the folder given as `pkg`)
//   /app/...      the chat app (dist/app, built by scripts/build-demo)
//   /test/...     test pages (./pages)
//   /vite/...     the Vite-built test app (./vite-app/dist)
//   /wllama/...   the @wllama/wllama dev dependency (the wllama benches)
//   /models/NAME/ a model folder registered with `models` (the tests' fixtures)
//   /hub/...      an imitation of a model hub (Hugging Face's API) serving the folders
//                 registered with `hub` (id → folder): /hub/api/models/{id}?blobs=true
//                 lists a folder's files, /hub/{id}/resolve/main/{file} serves one
// Files are served with HTTP range support. Every request is logged (`server.requests`),
// so tests can count shard fetches.
// `node test/serve.js --demo [--port N] [--model NAME=DIR]` serves the app.
import crypto from 'node:crypto';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.css': 'text/css',
  '.ts': 'text/plain',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.webmanifest': 'application/manifest+json',
  '.woff2': 'font/woff2',
};

/** The hub's listing of `dir`: `{ id, siblings: [{ rfilename, size, lfs: { sha256 } }] }`. */
function listing(id, dir) {
  const siblings = fs.readdirSync(dir).filter((f) => fs.statSync(path.join(dir, f)).isFile()).map((f) => {
    const bytes = fs.readFileSync(path.join(dir, f));
    const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
    return { rfilename: f, size: bytes.length, lfs: { sha256, size: bytes.length } };
  });
  return JSON.stringify({ id, siblings });
}

export function createServer({ models = {}, hub = {}, port = 0, pkg = path.join(root, 'pkg') } = {}) {
  const mounts = {
    pkg,
    app: path.join(root, 'dist/app'),
    test: path.join(here, 'pages'),
    vite: path.join(here, 'vite-app/dist'),
    wllama: path.join(root, 'web/node_modules/@wllama/wllama'), // the wllama benches (cases-wllama.js)
  };
  const requests = [];
  // Latency added to shard responses (a slow network for the cache tests); noRanges: answer
  // range requests with the whole file (a server without range support); isolated: send
  // COOP/COEP (false: a server that does not, so no wasm threads); offline: drop every
  // connection unanswered (a network that is down, for service workers too), counting them
  // in `refused`.
  const state = { shardDelayMs: 0, noRanges: false, isolated: true, offline: false, refused: 0 };
  const server = http.createServer((req, res) => {
    if (state.offline) {
      state.refused += 1;
      req.socket.destroy();
      return;
    }
    if (state.shardDelayMs && req.url.endsWith('.bin')) {
      setTimeout(() => respond(req, res), state.shardDelayMs);
    } else {
      respond(req, res);
    }
  });
  function respond(req, res) {
    const url = new URL(req.url, 'http://localhost');
    requests.push(url.pathname);
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    let dir;
    let rest;
    if (parts[0] === 'models' && parts.length >= 2) {
      dir = models[parts[1]];
      rest = parts.slice(2);
    } else if (parts[0] === 'hub' && parts[1] === 'api' && parts[2] === 'models') {
      const id = parts.slice(3).join('/');
      if (!hub[id]) return res.writeHead(404).end('{"error":"Repository not found"}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(listing(id, hub[id]));
      return;
    } else if (parts[0] === 'hub' && parts[3] === 'resolve' && parts[4] === 'main') {
      dir = hub[`${parts[1]}/${parts[2]}`];
      rest = parts.slice(5);
    } else {
      dir = mounts[parts[0]];
      rest = parts.slice(1);
    }
    if (!dir || rest.some((p) => p === '..' || p.includes('\0'))) {
      res.writeHead(404).end('not found');
      return;
    }
    let file = path.join(dir, ...rest);
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
    if (!fs.existsSync(file)) {
      res.writeHead(404).end('not found');
      return;
    }
    const size = fs.statSync(file).size;
    const headers = {
      'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
      'cache-control': 'no-store',
      'accept-ranges': 'bytes',
      // Cross-origin isolation: shared WebAssembly.Memory (wasm threads) needs it.
      ...(state.isolated && {
        'cross-origin-opener-policy': 'same-origin',
        'cross-origin-embedder-policy': 'require-corp',
      }),
    };
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (range && !state.noRanges) {
      const start = Number(range[1]);
      const end = Math.min(range[2] ? Number(range[2]) : size - 1, size - 1);
      if (start > end) return res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
      res.writeHead(206, { ...headers, 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${size}` });
      fs.createReadStream(file, { start, end }).pipe(res);
      return;
    }
    res.writeHead(200, { ...headers, 'content-length': size });
    fs.createReadStream(file).pipe(res);
  }
  return new Promise((resolve) => {
    server.listen(port, '127.0.0.1', () => {
      const { port: actual } = server.address();
      resolve({
        state,
        url: `http://127.0.0.1:${actual}`,
        requests,
        pkg,
        models,
        hub,
        close: () => new Promise((r) => server.close(r)),
      });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const port = Number(args[args.indexOf('--port') + 1]) || 8080;
  const models = {};
  args.forEach((a, i) => {
    if (a === '--model') {
      const [name, dir] = args[i + 1].split('=');
      models[name] = path.resolve(dir);
    }
  });
  createServer({ models, port }).then((s) => {
    console.log(`app: ${s.url}/app/  (models: ${Object.keys(models).map((m) => `/models/${m}/`).join(', ') || 'none; --model NAME=DIR'})`);
  });
}
