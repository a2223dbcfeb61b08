// The chat app's service worker.
// - Install: precache the app shell and the npm package (its JS, Workers and every wasm
//   variant) under a cache named by VERSION, so the app opens offline after one visit.
//   The build (vite.config.js) writes VERSION (a hash of the files) and PRECACHE.
// - Fetch: same-origin GETs inside the app's folder only. Pages (navigations) network
//   first, falling back to the cached shell; everything else cache first (the files are
//   hashed or versioned with the cache). Model files are never touched: the package keeps
//   them in its own Cache Storage, and they are not inside this folder anyway (a .gguf /
//   .bin / range request passes through even when they are).
// - COOP/COEP: responses it serves get the two headers when they lack them, so the page
//   is cross-origin isolated (wasm threads for the CPU backend) on a host that cannot
//   send headers.
// - Activate: delete the caches of older versions (only this app's: `pocketrt-app-*`),
//   and take control of open pages.
const VERSION = 'dev';
const PRECACHE = [];
const CACHE = `pocketrt-app-${VERSION}`;
const SCOPE = new URL('./', self.location).href;

self.addEventListener('install', (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(CACHE);
      await cache.addAll(PRECACHE.map((f) => new Request(new URL(f, SCOPE), { cache: 'reload' })));
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name.startsWith('pocketrt-app-') && name !== CACHE) await caches.delete(name);
      }
      await self.clients.claim();
    })(),
  );
});

/** `response` with COOP/COEP added where it has none (opaque responses stay as they are). */
function isolated(response) {
  if (!response || response.type === 'opaque' || response.type === 'opaqueredirect' || response.status === 0) return response;
  const headers = new Headers(response.headers);
  if (headers.has('cross-origin-embedder-policy') && headers.has('cross-origin-opener-policy')) return response;
  if (!headers.has('cross-origin-opener-policy')) headers.set('Cross-Origin-Opener-Policy', 'same-origin');
  if (!headers.has('cross-origin-embedder-policy')) headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
  if (!headers.has('cross-origin-resource-policy')) headers.set('Cross-Origin-Resource-Policy', 'same-origin');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

/** Whether the worker answers `request`: a GET of one of the app's own files. */
function handles(request) {
  if (request.method !== 'GET' || request.headers.has('range')) return false;
  const url = new URL(request.url);
  if (!url.href.startsWith(SCOPE)) return false;
  return !/\.(gguf|bin|safetensors)$/i.test(url.pathname) && !url.pathname.includes('/models/');
}

async function networkFirst(request) {
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (response.ok) await cache.put(new URL('./', SCOPE).href, response.clone());
    return response;
  } catch (e) {
    const cached = (await cache.match(new URL('./', SCOPE).href)) ?? (await cache.match(request, { ignoreSearch: true }));
    if (cached) return cached;
    throw e;
  }
}

async function cacheFirst(request) {
  const cache = await caches.open(CACHE);
  const cached = await cache.match(request, { ignoreSearch: true });
  if (cached) return cached;
  const response = await fetch(request);
  if (response.ok) await cache.put(request, response.clone());
  return response;
}

self.addEventListener('fetch', (event) => {
  const { request } = event;
  if (!handles(request)) return;
  const answer = request.mode === 'navigate' ? networkFirst(request) : cacheFirst(request);
  event.respondWith(answer.then(isolated));
});
