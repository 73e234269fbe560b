// Service worker: the app works offline after the first visit. App files are stored at
// install (the list comes from precache.json, written by scripts/build-web.sh, and the cache
// name carries a hash of the build so a new build replaces the old one). Model files are
// stored the first time they are used, unless asked with no-store (in the same cache the
// page's "Clear cached models" button empties). Only same-origin GET requests are handled;
// nothing else is touched.
//
// Every response it hands the page carries the cross-origin isolation headers (COOP/COEP),
// so static hosts that cannot send them (GitHub Pages, an intranet share) still give the
// page shared memory and the threaded engine; isolation.js reloads the page once on the
// first visit, when this worker starts controlling it. A hard reload bypasses the service
// worker, and with it the headers, until the next normal load.
const APP_CACHE = 'medrank-app-__BUILD_ID__';
const MODEL_CACHE = 'medrank-models-v1';

self.addEventListener('install', (event) => {
  event.waitUntil(
    (async () => {
      const files = await (await fetch('precache.json', { cache: 'no-cache' })).json();
      const cache = await caches.open(APP_CACHE);
      await cache.addAll(['./', ...files]);
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name.startsWith('medrank-app-') && name !== APP_CACHE) await caches.delete(name);
      }
      await self.clients.claim();
    })(),
  );
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin) return;
  const isModel = url.pathname.includes('/models/');
  event.respondWith(
    (async () => {
      const cache = await caches.open(isModel ? MODEL_CACHE : APP_CACHE);
      const hit = await cache.match(event.request, { ignoreSearch: true });
      if (hit) return isolated(hit);
      const response = await fetch(event.request);
      // A request that asks not to be stored (the 8-bit copy's facts) is not stored.
      if (response.ok && isModel && event.request.cache !== 'no-store')
        await cache.put(event.request, response.clone());
      return isolated(response);
    })(),
  );
});

/** The response with the headers that make the page cross-origin isolated (the ones
 *  `medrank serve` sends itself; setting them again changes nothing there). */
function isolated(response) {
  if (response.type === 'opaque' || response.type === 'opaqueredirect' || response.status === 0) return response;
  const headers = new Headers(response.headers);
  headers.set('Cross-Origin-Opener-Policy', 'same-origin');
  headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
  headers.set('Cross-Origin-Resource-Policy', 'same-origin');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}
