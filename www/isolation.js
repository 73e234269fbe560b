// Threads in the page need shared memory, which browsers give only to a cross-origin
// isolated page (COOP: same-origin + COEP: require-corp on the page and its scripts).
// `medrank serve` sends those headers. Static hosts that cannot set headers (GitHub Pages,
// an intranet share) get them from our service worker (sw.js adds them to this site's own
// responses), which controls the page only from the next load on: so on the first visit
// the page reloads itself once. A sessionStorage flag makes sure it never reloads twice,
// whatever the browser does. Plain http:// hosts other than localhost get no service worker
// at all: the engine then runs on one thread and the page says why.

const RELOADED = 'medrank-isolation-reload';

/** Registers sw.js; when that can make this page isolated, reloads once — unless `busy()`
 *  says the user has already started (then `onReloadNeeded()` is called instead). Calls
 *  `onRegistered()` once the service worker is in place (offline use works from then on). */
export function registerServiceWorker({ busy = () => false, onReloadNeeded = () => {}, onRegistered = () => {} } = {}) {
  if (!('serviceWorker' in navigator) || location.protocol === 'file:') return;
  if (self.crossOriginIsolated) sessionStorage.removeItem(RELOADED);
  navigator.serviceWorker
    .register('sw.js')
    .then(async () => {
      onRegistered();
      if (self.crossOriginIsolated) return;
      await navigator.serviceWorker.ready;
      if (!navigator.serviceWorker.controller) {
        // sw.js claims open pages when it activates; wait for that.
        await new Promise((resolve) =>
          navigator.serviceWorker.addEventListener('controllerchange', resolve, { once: true }),
        );
      }
      if (sessionStorage.getItem(RELOADED)) return; // reloaded once already: the browser says no
      if (busy()) {
        onReloadNeeded();
        return;
      }
      sessionStorage.setItem(RELOADED, '1');
      location.reload();
    })
    .catch(() => {});
}

/** "CPU · 4 threads" ("CPU · 4 threads · relaxed SIMD" on the relaxed-SIMD build), or
 *  "CPU · 1 thread: <why>", from the engine's 'ready' message. */
export function describeThreads(engine) {
  if (!engine) return '';
  const n = engine.threads || 1;
  const head = `CPU · ${n} thread${n === 1 ? '' : 's'}${engine.relaxedSimd ? ' · relaxed SIMD' : ''}`;
  return engine.threadsWhy ? `${head}: ${engine.threadsWhy}` : head;
}

/** "4 threads", or "1 thread (<why>)": how a finished CPU run says where it ran. */
export function threadsPhrase(engine) {
  const n = engine?.threads || 1;
  const head = `${n} thread${n === 1 ? '' : 's'}`;
  return engine?.threadsWhy ? `${head} (${engine.threadsWhy})` : head;
}

/** The thread count the user chose in Options (kept in localStorage), or null for the
 *  default (navigator.hardwareConcurrency). */
export function chosenThreads() {
  const n = Number(localStorage.getItem('medrank-threads'));
  return Number.isInteger(n) && n > 0 ? n : null;
}

export function chooseThreads(n) {
  if (Number.isInteger(n) && n > 0) localStorage.setItem('medrank-threads', String(n));
  else localStorage.removeItem('medrank-threads');
}

/** The worker's URL with the thread count it should start; a page opened with `?simd=plain`
 *  runs the threaded build without relaxed SIMD (to measure or test what it changes). */
export function workerUrl(base) {
  const url = new URL('./worker.js', base);
  const n = chosenThreads();
  if (n) url.searchParams.set('threads', String(n));
  if (new URL(location.href).searchParams.get('simd') === 'plain') url.searchParams.set('simd', 'plain');
  return url;
}
