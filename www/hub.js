// A model by its Hugging Face Hub id, downloaded by the worker with the browser's fetch. Every
// decision is the engine's (`HubDownload`, the CLI's own code in src/hub/): the listing's URL,
// which files to take, the size bounds, where a redirect may lead, and each file's check as
// its bytes arrive (never more than listed, exactly the listed size, the Hub's sha256 or git
// blob id). This file only moves bytes: GET requests that carry nothing of the user's (no
// token, no cookie, no referrer), and the Cache API.
//
// The browser's cache holds each file once, named by its digest (`hub-blobs/DIGEST`, written
// only once checked), and per id the plan it was downloaded by (`hub-refs/LISTING-URL`,
// written last, once every file is in): so nothing half-downloaded is ever used, a second run
// downloads nothing, and with the Hub out of reach the cached model still runs (as the CLI
// falls back on the Hugging Face cache).

// scripts/build-web.sh writes `false` here for a site built with MEDRANK_HUB=off: the page
// then offers no Hub choice and the worker refuses one (and the policy's connect-src is 'self').
export const HUB_ACCESS = true;

/** A same-origin key in the Cache API, never requested from the network. */
const cacheKey = (...parts) => new URL(parts.map(encodeURIComponent).join('/'), self.location.href).href;

/** An HTTP answer's head as the engine reads it (`page::hub::Answer`). */
function answerOf(response) {
  const header = (name) => response.headers.get(name);
  const length = header('content-length');
  return {
    status: response.status,
    status_text: response.statusText,
    url: response.url,
    error_code: header('x-error-code'),
    error_message: header('x-error-message'),
    repo_commit: header('x-repo-commit'),
    length: length === null ? null : Number(length),
  };
}

const REQUEST = { credentials: 'omit', referrerPolicy: 'no-referrer', cache: 'no-store' };

/** "90.9 MB": decimal units, as the Hub's pages (and the CLI) show sizes. */
export function hubBytes(n) {
  if (n < 1e3) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(2)} GB`;
}

/**
 * The model's files by path ({name, files}), named `hf://ORG/NAME@COMMIT` as the CLI names
 * them in reports. `choice`: {id, endpoint?};
 * `progress(stage, done, total)` returns false on Cancel; `onPlan(plan)` hears the plan
 * (files, sizes, what is cached) before any file is asked for; `keep(cache, key, response)`
 * stores a file (a refusal of the browser's storage only costs the next visit a download).
 */
export async function loadHubModel({ medrank, choice, progress, onPlan, keep, cache }) {
  if (!HUB_ACCESS)
    throw new Error('This site was built without Hugging Face Hub access: choose a model from this computer.');
  const hub = new medrank.HubDownload(choice.id, choice.endpoint || undefined);
  try {
    const refKey = cacheKey('hub-refs', hub.listing_url());
    progress(`Asking the Hub for ${choice.id}`, 0, 0);
    let plan;
    let listing = null;
    try {
      listing = await fetch(hub.listing_url(), REQUEST);
    } catch (e) {
      // No answer at all (offline, the Hub out of reach): the plan this browser kept serves.
      const kept = await cache.match(refKey);
      if (!kept)
        throw {
          message: `The Hub could not be reached (${e.message || e}), and ${choice.id} is not kept in this browser.`,
          location: { file: `hf://${choice.id}` },
        };
      plan = await kept.json();
      plan.offline = true;
    }
    if (listing) plan = JSON.parse(hub.plan(answerOf(listing), new Uint8Array(await listing.arrayBuffer())));
    const files = {};
    for (const file of plan.files) {
      const hit = await cache.match(cacheKey('hub-blobs', file.digest));
      if (hit) files[file.path] = new Uint8Array(await hit.arrayBuffer());
    }
    const missing = plan.files.filter((f) => !files[f.path]);
    if (missing.length && plan.offline)
      throw {
        message: `The Hub could not be reached, and this browser keeps only part of the model (${missing.map((f) => f.path).join(', ')} missing).`,
        location: { file: plan.name },
      };
    const toFetch = missing.reduce((sum, f) => sum + f.size, 0);
    onPlan({
      name: plan.name,
      total: plan.total,
      download: toFetch,
      from: new URL(hub.listing_url()).host,
      offline: Boolean(plan.offline),
      files: plan.files.map((f) => ({ path: f.path, size: f.size, cached: Boolean(files[f.path]) })),
    });
    let done = 0;
    for (const file of missing) {
      files[file.path] = await download(hub, plan, file, (received) =>
        progress(
          `Downloading ${plan.name}: ${file.path}, ${hubBytes(done + received)} of ${hubBytes(toFetch)}`,
          done + received,
          toFetch,
        ),
      );
      done += file.size;
      await keep(cache, cacheKey('hub-blobs', file.digest), new Response(files[file.path]));
    }
    // Written last: a kept plan's files are all kept.
    if (!plan.offline) await keep(cache, refKey, new Response(JSON.stringify(plan)));
    return { name: plan.name, files };
  } finally {
    hub.free();
  }
}

/** One file, checked by the engine chunk by chunk; its bytes, or an error naming it. */
async function download(hub, plan, file, onBytes) {
  const named = { file: `${plan.name}/${file.path}` };
  let response;
  try {
    response = await fetch(file.url, REQUEST);
  } catch (e) {
    throw { message: `The download failed (${e.message || e}); nothing was kept.`, location: named };
  }
  hub.open(file.path, answerOf(response));
  const bytes = new Uint8Array(file.size);
  const reader = response.body.getReader();
  let received = 0;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      throw {
        message: `The transfer broke off after ${received} of the ${file.size} bytes the Hub's listing announces (truncated: ${e.message || e}); nothing was kept.`,
        location: named,
      };
    }
    if (chunk.done) break;
    try {
      hub.update(chunk.value); // refused at once past the listed size
    } catch (e) {
      reader.cancel().catch(() => {});
      throw e;
    }
    bytes.set(chunk.value, received);
    received += chunk.value.length;
    if (onBytes(received) === false) {
      reader.cancel().catch(() => {});
      throw { message: 'cancelled', cancelled: true };
    }
  }
  hub.finish();
  return bytes;
}
