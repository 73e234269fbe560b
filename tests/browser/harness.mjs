// Shared setup for the browser tests: serve the built site with the project's own server
// (`medrank serve`), launch Debian's Chromium through playwright-core, record every request.
//
// Environment:
//   MEDRANK_SITE  the built site (default <repo>/dist/site; scripts/build-web.sh writes it)
//   MEDRANK_BIN   the medrank binary (default $CARGO_TARGET_DIR or <repo>/target, debug then release)
//   CHROMIUM      the browser (default /usr/bin/chromium)
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const SITE = process.env.MEDRANK_SITE || join(ROOT, 'dist/site');
export const EXAMPLES = join(ROOT, 'examples');
export const ARTIFACTS = join(ROOT, 'tests/browser/artifacts');
mkdirSync(ARTIFACTS, { recursive: true });

export function medrankBin() {
  if (process.env.MEDRANK_BIN) return process.env.MEDRANK_BIN;
  const targets = [process.env.CARGO_TARGET_DIR, join(ROOT, 'target')].filter(Boolean);
  for (const t of targets) for (const profile of ['debug', 'release']) {
    const p = join(t, profile, 'medrank');
    if (existsSync(p)) return p;
  }
  throw new Error('medrank binary not found: build it (cargo build --release) or set MEDRANK_BIN');
}

/** Start `medrank serve SITE --port 0` and resolve to its base URL (read from its stdout);
 *  `hubStandIn`: a stand-in Hub's URL its policy lets the page's worker reach too. */
export async function startServer({ hubStandIn = null } = {}) {
  if (!existsSync(join(SITE, 'index.html'))) throw new Error(`${SITE} has no index.html: run scripts/build-web.sh first`);
  const args = ['serve', SITE, '--port', '0', ...(hubStandIn ? ['--hub-stand-in', hubStandIn] : [])];
  const child = spawn(medrankBin(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await new Promise((resolvePromise, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`medrank serve printed no URL: ${out}`)), 15000);
    const onData = (chunk) => {
      out += chunk;
      const m = out.match(/http:\/\/127\.0\.0\.1:\d+\//);
      if (m) {
        clearTimeout(timer);
        resolvePromise(m[0]);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`medrank serve exited with ${code}: ${out}`)));
  });
  return { url, stop: () => child.kill() };
}

/**
 * Serve the built site with Python's plain static server: no COOP/COEP headers, like a host
 * that cannot set them (GitHub Pages, an intranet share). Resolves to its base URL.
 */
export async function startStaticServer() {
  const child = spawn('python3', ['-u', '-m', 'http.server', '0', '--bind', '127.0.0.1', '--directory', SITE], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await new Promise((resolvePromise, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`python3 -m http.server printed no port: ${out}`)), 15000);
    const onData = (chunk) => {
      out += chunk;
      const m = out.match(/port (\d+)/);
      if (m) {
        clearTimeout(timer);
        resolvePromise(`http://127.0.0.1:${m[1]}/`);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`python3 -m http.server exited with ${code}: ${out}`)));
  });
  return { url, stop: () => child.kill() };
}

export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

/**
 * A browser page on the served site, with every request and console error recorded.
 * `requests` holds {url, method, postData, resourceType, time} in order.
 *
 * If opening fails, the browser and the server are closed before the error is thrown: a
 * server left running kept a test file's process alive, and a CI run waited on it until its
 * time limit. If the whole browser process went away while the page was first loading
 * (seen once in CI: "Target page, context or browser has been closed" 0.4 s after launch,
 * every test before and after it passing), it is started once more and says so on stderr;
 * a page that crashes while the browser lives is never retried.
 */
export async function openApp({ webgpu = false, staticServer = false, serviceWorkers = 'allow', hubStandIn = null } = {}, retried = false) {
  const server = staticServer ? await startStaticServer() : await startServer({ hubStandIn });
  let browser = null;
  try {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: [...CHROMIUM_ARGS, ...(webgpu ? ['--enable-unsafe-webgpu'] : [])],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true, serviceWorkers });
    const requests = [];
    const consoleErrors = [];
    context.on('request', (r) => requests.push({ url: r.url(), method: r.method(), postData: r.postData(), resourceType: r.resourceType(), time: Date.now() }));
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    // A stand-in Hub: the page's option for it (honoured for one on this machine only).
    await page.goto(hubStandIn ? `${server.url}?hub=${encodeURIComponent(hubStandIn)}` : server.url);
    await page.waitForFunction(() => document.querySelector('#version')?.textContent !== '—', null, { timeout: 60000 });
    const close = async () => {
      await browser.close();
      server.stop();
    };
    return { page, context, browser, server, requests, consoleErrors, close };
  } catch (e) {
    const browserGone = browser !== null && !browser.isConnected();
    await browser?.close().catch(() => {});
    server.stop();
    if (browserGone && !retried) {
      process.stderr.write(`openApp: the browser process exited while the page loaded (${e.message.split('\n')[0]}); starting it once more\n`);
      return openApp({ webgpu, staticServer, serviceWorkers, hubStandIn }, true);
    }
    throw e;
  }
}

/** Upload files (paths relative to examples/) through the page's file picker. */
export async function upload(page, relativePaths) {
  await page.setInputFiles('#file-input', relativePaths.map((p) => join(EXAMPLES, p)));
  await waitForChecks(page, relativePaths.length);
}

/** Wait until at least `rows` files are listed and none says "checking…" (the page reads
 *  files asynchronously, so rows appear after setInputFiles returns). The page's own list
 *  counts too: a test that empties `state.files` before an upload leaves the old rows on
 *  screen, all checked, until the new files have been read, and those rows alone would let
 *  the wait end before the new files are there. */
export async function waitForChecks(page, rows = 1) {
  await page.waitForFunction((n) => {
    const cells = [...document.querySelectorAll('#files td.check')];
    const files = window.medrank.state.files;
    return (
      cells.length >= n
      && !cells.some((td) => td.textContent.includes('checking'))
      && files.length >= n
      && !files.some((f) => f.check.status === 'pending')
    );
  }, rows, { timeout: 60000 });
}

/** Sets Options fields by their option's name (the CLI's flag; `data-option` in the page),
 *  as a user types or picks them: `{ controls: 'all' }`. */
export async function setOptions(page, values) {
  await page.evaluate(() => { document.querySelector('details.options').open = true; });
  for (const [key, value] of Object.entries(values)) {
    const field = `[data-option="${key}"]`;
    const tag = await page.$eval(field, (e) => e.tagName);
    if (typeof value === 'boolean') await page.setChecked(field, value);
    else if (tag === 'SELECT') await page.selectOption(field, value);
    else await page.fill(field, String(value));
    await page.dispatchEvent(field, 'change');
  }
}

/** Click a run button and wait for the results (or an error box). */
export async function run(page, buttonId) {
  // Results of an earlier job stay on screen, so "results visible" alone would return at
  // once: wait until this job has finished and replaced the last result (or failed).
  await page.evaluate((id) => {
    window.__resultBeforeRun = window.medrank.state.lastResult;
    window.__runClicked = false;
    document.querySelector(id).addEventListener('click', () => { window.__runClicked = true; }, { once: true });
  }, buttonId);
  await page.click(buttonId);
  try {
    await page.waitForFunction(
      () => !window.medrank.state.running
        && (window.medrank.state.lastResult !== window.__resultBeforeRun || !document.querySelector('#run-error').hidden),
      null,
      { timeout: 120000 },
    );
  } catch (e) {
    // Say where the page stood when time ran out: a job still running (and at which stage)
    // is slowness; no job running and no new result is a click the page never acted on.
    const where = await page
      .evaluate((id) => {
        const s = window.medrank.state;
        return {
          running: s.running ? s.running.job : null,
          progress: document.querySelector('#progress')?.hidden ? null : document.querySelector('#progress')?.textContent.trim(),
          pendingMessages: s.pending.size,
          newResult: s.lastResult !== window.__resultBeforeRun,
          clickReachedTheButton: window.__runClicked,
          buttonDisabledNow: document.querySelector(id)?.disabled,
          rankCheck: s.rankCheck?.status ?? null,
          runError: document.querySelector('#run-error')?.hidden ? null : document.querySelector('#run-error')?.textContent,
        };
      }, buttonId)
      .catch((err) => `unreadable: ${err.message}`);
    e.message += `\nthe page when the wait ended: ${JSON.stringify(where)}`;
    throw e;
  }
  const error = await page.$eval('#run-error', (e) => (e.hidden ? null : e.textContent));
  if (error) throw new Error(`the page reported: ${error}`);
}

/** Starts the training form as filled in and waits for it to end (`timeoutMs`: a run on
 *  SwiftShader's WebGPU takes minutes); resolves to the page's `state.lastTraining` ({report,
 *  stored, backend}), or throws with the page's error. */
export async function trainFilledForm(page, timeoutMs = 300000) {
  await page.evaluate(() => { window.__trainingBefore = window.medrank.state.lastTraining; });
  await page.click('#train-run');
  await page.waitForFunction(
    () => !window.medrank.state.running
      && (window.medrank.state.lastTraining !== window.__trainingBefore || !document.querySelector('#train-error').hidden),
    null,
    { timeout: timeoutMs },
  );
  const error = await page.$eval('#train-error', (e) => (e.hidden ? null : e.textContent));
  if (error) throw new Error(`the page reported: ${error}`);
  return page.evaluate(() => window.medrank.state.lastTraining);
}

/** Fills the training form with a case of train.test.mjs ({file, dev?, task, arguments, recipe?, freeze?,
 *  settings}) and trains on `backend` (the Model section's choice, its model too); resolves
 *  to the page's {report, stored, backend} (or throws with the page's error). On 'gpu' the
 *  adapter here is SwiftShader, a CPU emulation ~100 times slower than the wasm CPU path and
 *  as slow again when the machine is busy: those runs get more time. */
export async function pageTrain(page, c, name, backend = 'cpu') {
  const s = c.settings;
  await page.selectOption('#opt-backend', backend);
  await page.setInputFiles('#train-file', c.file);
  // A bundle's, HiTZ file's or rubric file's instances; a metrics file's scored candidates.
  await page.waitForFunction(() => /instances|candidates/.test(document.querySelector('#train-file-info').textContent), null, {
    timeout: 30000,
  });
  await page.selectOption('#train-task', c.task);
  await page.selectOption('#train-arguments', c.arguments);
  // The recipe named, as the CLI's comparison names it (on a GPU the default is finetune).
  await page.selectOption('#train-recipe', c.recipe || 'fast');
  await page.selectOption('#train-freeze', c.freeze || 'head');
  if (c.scoreInput) await page.selectOption('#train-score-input', c.scoreInput);
  if (c.dev)
    await page.setInputFiles('#train-dev-file', c.dev); // picks "a file"
  else await page.check('input[name=train-dev][value=split]');
  for (const [id, v] of [
    ['#train-dev-split', s.split],
    ['#train-epochs', s.epochs],
    ['#train-lr', s.lr],
    ['#train-batch', s.batch],
    ['#train-patience', s.patience],
    ['#train-seed', s.seed],
    ['#train-name', name],
  ])
    await page.fill(id, String(v));
  return trainFilledForm(page, backend === 'gpu' ? 900000 : 300000);
}

export async function openTab(page, name) {
  await page.click(`#tabs [role=tab]:text-is("${name}")`);
}

export async function screenshot(page, name) {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Run the medrank CLI and return its stdout (throws with stderr on failure). */
export function cli(args, cwd = ROOT) {
  return execFileSync(medrankBin(), args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `medrank train` with a training case's options (as `pageTrain` fills the form: its file,
 *  dev file or split, task, arguments, recipe, freeze and settings; `c.model` or the bundled
 *  model); returns the folder's train_log.json. */
export function cliTrain(c, out) {
  const s = c.settings;
  const dev = c.dev ? ['--dev', c.dev] : ['--dev-split', String(s.split)];
  cli([
    'train',
    '--model',
    c.model || join(ROOT, 'models/all-MiniLM-L6-v2'),
    '--train',
    c.file,
    ...dev,
    '--task',
    c.task,
    '--arguments',
    c.arguments,
    '--recipe',
    c.recipe || 'fast',
    '--freeze',
    c.freeze || 'head',
    '--epochs',
    String(s.epochs),
    '--lr',
    String(s.lr),
    '--batch-size',
    String(s.batch),
    '--patience',
    String(s.patience),
    '--seed',
    String(s.seed),
    ...(c.scoreInput ? ['--score-input', c.scoreInput] : []),
    '--out',
    out,
  ]);
  return JSON.parse(readFileSync(join(out, 'train_log.json'), 'utf8'));
}

/** Does this medrank binary know a subcommand? (The CLI grows while the page does.) */
export function cliHas(subcommand) {
  try {
    execFileSync(medrankBin(), [subcommand, '--help'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The bundled default model's folder, and whether both it and the site's copy are there
 *  (the training tests need both: the CLI reads one, the page the other). */
export const DEFAULT_MODEL = join(ROOT, 'models/all-MiniLM-L6-v2');
export const haveDefaultModel =
  existsSync(join(SITE, 'models/all-MiniLM-L6-v2/model.safetensors')) && existsSync(join(DEFAULT_MODEL, 'model.safetensors'));

/** Writes the first `n` lines of the JSON Lines file `src` to `out` (a smaller set, for the
 *  slow cases); returns `out`. */
export function firstLines(src, n, out) {
  writeFileSync(out, readFileSync(src, 'utf8').split('\n').slice(0, n).join('\n') + '\n');
  return out;
}

export const readExample = (p) => readFileSync(join(EXAMPLES, p), 'utf8');

/**
 * Deep equality where numbers may differ in the last bits: wasm's libm and the native C
 * library round ln/exp differently (seen: a BM25 score 8.053326106054758 natively,
 * 8.05332610605476 in the browser). Returns the paths that differ.
 */
export function differences(a, b, path = '$', out = []) {
  if (typeof a === 'number' && typeof b === 'number') {
    if (!(a === b || Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(a), Math.abs(b)))) out.push(`${path}: ${a} vs ${b}`);
  } else if (a && b && typeof a === 'object' && typeof b === 'object') {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) differences(a[k], b[k], `${path}.${k}`, out);
  } else if (a !== b) {
    out.push(`${path}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  }
  return out;
}


/** Paths where two values differ: numbers by more than `tol` (absolute), anything else at all. */
export function differencesAbs(a, b, tol, path = '$', out = []) {
  if (typeof a === 'number' && typeof b === 'number') {
    if (!(Math.abs(a - b) <= tol)) out.push(`${path}: ${a} vs ${b}`);
  } else if (a && b && typeof a === 'object' && typeof b === 'object') {
    if (Array.isArray(a) !== Array.isArray(b) || (Array.isArray(a) && a.length !== b.length)) {
      out.push(`${path}: ${JSON.stringify(a).slice(0, 80)} vs ${JSON.stringify(b).slice(0, 80)}`);
      return out;
    }
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) differencesAbs(a[k], b[k], tol, `${path}.${k}`, out);
  } else if (a !== b) {
    out.push(`${path}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  }
  return out;
}

/** Paths that differ beyond `rel` relative tolerance (absolute below 1e-300). */
export function differencesWithin(a, b, rel, path = '$', out = []) {
  if (typeof a === 'number' && typeof b === 'number') {
    if (!(a === b || Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b), 1e-300))) out.push(`${path}: ${a} vs ${b}`);
  } else if (a && b && typeof a === 'object' && typeof b === 'object') {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) differencesWithin(a[k], b[k], rel, `${path}.${k}`, out);
  } else if (a !== b) {
    out.push(`${path}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  }
  return out;
}

/** The CLI names inputs by the path it was given, the page by the file name; the order in
 *  which a front end lists its inputs is not part of the result. */
export function withoutPaths(report) {
  const copy = structuredClone(report);
  const strip = (p) => {
    p.inputs.forEach((f) => { f.name = f.name.split('/').pop(); });
    p.inputs.sort((x, y) => x.name.localeCompare(y.name) || x.sha256.localeCompare(y.sha256));
  };
  strip(copy.provenance);
  for (const e of copy.evaluators) strip(e.report.provenance);
  if (copy.controls_added) strip(copy.controls_added.provenance);
  return copy;
}

/** The convention `precision` of a report's provenance. */
export const precisionOf = (report) => report.provenance.conventions.find(([k]) => k === 'precision')?.[1];

/** The report with its precision convention's kernel name left out: the page's kernel is a
 *  wasm one, the CLI's this CPU's (the same integer sums, ARCHITECTURE.md). */
export function withoutKernel(report) {
  const copy = structuredClone(report);
  copy.provenance.conventions = copy.provenance.conventions.map(([k, v]) =>
    k === 'precision' ? [k, v.replace(/; [a-z0-9-]+ kernel\)$/, '; kernel)')] : [k, v],
  );
  return copy;
}

/** Static files a page may request once a job has started (same origin, no content). */
export const STATIC = /\.(html|js|mjs|css|wasm|json|jsonl|csv|tsv|txt|xml|svg|png|ico|safetensors)$|\/$/;

/**
 * Privacy by construction, on a recorded request log (`openApp().requests`): every request
 * goes to the page's own origin, as a GET without a body or a query string; from `since` on
 * (a job started), only static files. Throws naming the first request that breaks a rule.
 */
export function assertOwnStaticFilesOnly(requests, origin, since) {
  if (!requests.length) throw new Error('the recorder saw no request');
  for (const r of requests) {
    const url = new URL(r.url);
    // blob: URLs are the page's own exports, created in memory.
    if (url.protocol === 'blob:' || url.protocol === 'data:') continue;
    if (url.origin !== origin) throw new Error(`request to another origin: ${r.url}`);
    if (r.method !== 'GET') throw new Error(`${r.method} ${r.url}`);
    if (r.postData !== null) throw new Error(`request with a body: ${r.url}`);
    if (url.search !== '') throw new Error(`query string carrying content: ${r.url}`);
    if (r.time >= since) {
      const path = url.pathname;
      if (!STATIC.test(path)) throw new Error(`not a static file after the job started: ${r.url}`);
      if (/^\/(api|upload|collect|log)/.test(path)) throw new Error(r.url);
    }
  }
}

/** The example's MCQA instances `copies` times over, each copy with its own ids, written to
 *  a new temporary folder: a long run on real text whose batches span the example's lengths
 *  (20 copies: 960 contexts and 1,200 options, about a minute on a 2-core machine's CPU). */
export function scaledUpBundle(copies) {
  const lines = readFileSync(join(EXAMPLES, 'bundle.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"task": "mcqa"'));
  const out = [];
  for (let c = 0; c < copies; c++)
    for (const line of lines) {
      const record = JSON.parse(line);
      record.id = `${record.id}-copy${c}`;
      out.push(JSON.stringify(record));
    }
  const dir = mkdtempSync(join(tmpdir(), 'medrank-long-'));
  writeFileSync(join(dir, 'long_bundle.jsonl'), out.join('\n') + '\n');
  return join(dir, 'long_bundle.jsonl');
}

/** Sets the page up for a long ranking of `bundle` (a path): the bundled model on the CPU,
 *  no generated controls; resolves once the check before the run says what it encodes. */
export async function setUpLongRun(page, bundle) {
  await page.setInputFiles('#file-input', [bundle]);
  await waitForChecks(page, 1);
  await page.check('input[name=model][value=bundled]');
  await page.selectOption('#opt-backend', 'cpu');
  await page.evaluate(() => {
    document.querySelector('details.options').open = true;
  });
  await page.fill('#opt-controls', '');
  await page.dispatchEvent('#opt-controls', 'change');
  await page.waitForFunction(() => /encodes [\d,]+ sequences/.test(document.querySelector('#rank-check')?.textContent));
}
