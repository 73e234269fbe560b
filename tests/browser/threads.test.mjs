// Threads in the page: the threaded build with relaxed SIMD under `medrank serve`
// (cross-origin isolated by its headers; Chromium runs relaxed SIMD), the threaded build
// without it (what a browser without relaxed SIMD gets), the single-threaded build, the service-worker path on a static host that sends
// no COOP/COEP (first load one thread, one reload, then N threads), the fallback without a
// service worker, the model kept across jobs, and a BERT-base-sized model in the threaded
// build's fixed shared memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import {
  openApp,
  upload,
  setOptions,
  waitForChecks,
  cli,
  screenshot,
  startStaticServer,
  differencesWithin,
  withoutPaths,
  CHROMIUM_ARGS,
  ROOT,
  SITE,
  EXAMPLES,
} from './harness.mjs';

const MODEL = 'models/all-MiniLM-L6-v2';
const haveModel =
  existsSync(join(SITE, MODEL, 'model.safetensors')) && existsSync(join(ROOT, MODEL, 'model.safetensors'));
const haveThreads = existsSync(join(SITE, 'pkg-threads/medrank_bg.wasm'));
const haveRelaxed = existsSync(join(SITE, 'pkg-threads-relaxed/medrank_bg.wasm'));
const NO_MODEL = 'no bundled model: run scripts/setup.sh model, then scripts/build-web.sh';
const NO_THREADS = 'the site has no threaded build (scripts/build-web.sh needs std sources)';

/** The engine's 'ready' message as the page keeps it, once the engine is up. */
async function engine(page) {
  await page.waitForFunction(() => window.medrank?.state?.engine, null, { timeout: 60000 });
  return page.evaluate(() => window.medrank.state.engine);
}

/** Rank systems with the bundled model on the CPU; returns the page's last result. */
async function rankWithModel(page) {
  await page.check('input[name=model][value=bundled]');
  return rankOnCpu(page);
}

/** Rank systems on the CPU with the model chosen in the page; returns its last result. */
async function rankOnCpu(page) {
  await page.selectOption('#opt-backend', 'cpu');
  // Every control the inputs allow, as the CLI's bare --controls.
  await setOptions(page, { controls: 'all' });
  await page.evaluate(() => {
    window.previousResult = window.medrank.state.lastResult;
  });
  await page.click('#run-rank_systems');
  await page.waitForFunction(
    () => window.medrank.state.lastResult !== window.previousResult || !document.querySelector('#run-error').hidden,
    null,
    { timeout: 300000 },
  );
  const error = await page.$eval('#run-error', (e) => (e.hidden ? null : e.textContent));
  if (error) throw new Error(`the page reported: ${error}`);
  return page.evaluate(() => window.medrank.state.lastResult);
}

/** The CLI's report for the example bundle with the bundled model on the CPU (computed once). */
let cliReport = null;
function nativeReport() {
  if (!cliReport) {
    const out = mkdtempSync(join(tmpdir(), 'medrank-cli-'));
    cli([
      'evaluate',
      '--bundle',
      join(EXAMPLES, 'bundle.jsonl'),
      '--model',
      MODEL,
      '--controls',
      '--corpus',
      join(EXAMPLES, 'corpus.jsonl'),
      '--backend',
      'cpu',
      '--seed',
      '0',
      '--json',
      join(out, 'report.json'),
      '--quiet',
    ]);
    cliReport = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
  }
  return cliReport;
}

test(
  'threaded build with relaxed SIMD under medrank serve: N threads, the CLI’s numbers; the model is kept for the second job',
  { skip: (!haveModel && NO_MODEL) || (!haveRelaxed && NO_THREADS) },
  async (t) => {
    const app = await openApp();
    try {
      const { page } = app;
      const cores = await page.evaluate(() => navigator.hardwareConcurrency);
      const info = await engine(page);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), true, 'medrank serve isolates the page');
      assert.equal(info.threadedBuild, true);
      assert.equal(info.relaxedSimd, true, 'Chromium validates relaxed SIMD');
      assert.equal(info.threads, cores, 'the pool has navigator.hardwareConcurrency threads by default');
      assert.ok(cores > 1, `this machine has ${cores} cores; the test needs two`);
      assert.equal(
        await page.textContent('#engine'),
        `engine: wasm (Web Worker) · CPU · ${cores} threads · relaxed SIMD`,
      );

      await upload(page, ['bundle.jsonl', 'corpus.jsonl']);
      const first = await rankWithModel(page);
      assert.equal(first.modelLoaded, true, 'the first job reads the model');
      assert.equal(first.result.threads, cores);
      assert.equal(await page.textContent('#backend-used'), `Ran on the CPU (WebAssembly) on ${cores} threads`);
      const worst = differencesWithin(withoutPaths(first.result.report), withoutPaths(nativeReport()), 1e-5);
      assert.deepEqual(worst, []);

      // The second job with the same model: no reading, the same numbers exactly.
      const stages = [];
      await page.exposeFunction('recordStage', (s) => stages.push(s));
      await page.evaluate(() => {
        const stage = document.querySelector('#progress-stage');
        new MutationObserver(() => window.recordStage(stage.textContent)).observe(stage, {
          childList: true,
          characterData: true,
          subtree: true,
        });
      });
      const second = await rankWithModel(page);
      assert.equal(second.modelLoaded, false, 'the second job uses the kept model');
      assert.ok(
        !stages.some((s) => /Loading the model|Reading the model/.test(s)),
        `stages of the second job: ${stages.join(' | ')}`,
      );
      assert.ok(
        stages.some((s) => /Encoding with the model/.test(s)),
        `stages of the second job: ${stages.join(' | ')}`,
      );
      assert.deepEqual(second.result.report, first.result.report);
      t.diagnostic(
        `first job ${(first.elapsedMs / 1000).toFixed(1)} s, second ${(second.elapsedMs / 1000).toFixed(1)} s on ${cores} threads`,
      );
    } finally {
      await app.close();
    }
  },
);

test(
  'without the relaxed-SIMD build: the plain threaded build, N threads, the CLI’s numbers',
  { skip: (!haveModel && NO_MODEL) || (!haveThreads && NO_THREADS) },
  async () => {
    // medrank serve isolates by its headers, so no service worker is needed (nor could one
    // answer from its cache what the route below refuses).
    const app = await openApp({ serviceWorkers: 'block' });
    try {
      const { page, context } = app;
      // What a browser without relaxed SIMD (Safari) or a site without that build gets.
      await context.route('**/pkg-threads-relaxed/**', (route) => route.abort());
      await page.reload();
      const info = await engine(page);
      const cores = await page.evaluate(() => navigator.hardwareConcurrency);
      assert.equal(info.threadedBuild, true);
      assert.equal(info.relaxedSimd, false);
      assert.equal(info.threads, cores);
      assert.equal(await page.textContent('#engine'), `engine: wasm (Web Worker) · CPU · ${cores} threads`);
      await upload(page, ['bundle.jsonl', 'corpus.jsonl']);
      const run = await rankWithModel(page);
      assert.equal(run.result.threads, cores);
      assert.deepEqual(differencesWithin(withoutPaths(run.result.report), withoutPaths(nativeReport()), 1e-5), []);
    } finally {
      await app.close();
    }
  },
);

test(
  'one thread chosen in Options: the single-threaded build, the CLI’s numbers',
  { skip: !haveModel && NO_MODEL },
  async () => {
    const app = await openApp();
    try {
      const { page } = app;
      await engine(page);
      await page.evaluate(() => {
        document.querySelector('details.options').open = true;
      });
      await page.evaluate(() => {
        window.medrank.state.engine = null;
      });
      await page.fill('#opt-threads', '1');
      await page.dispatchEvent('#opt-threads', 'change');
      const info = await engine(page);
      assert.equal(info.threadedBuild, false);
      assert.equal(info.threads, 1);
      assert.equal(
        await page.textContent('#engine'),
        'engine: wasm (Web Worker) · CPU · 1 thread: one thread chosen in Options',
      );
      await upload(page, ['bundle.jsonl', 'corpus.jsonl']);
      const run = await rankWithModel(page);
      assert.equal(run.result.threads, 1);
      assert.deepEqual(differencesWithin(withoutPaths(run.result.report), withoutPaths(nativeReport()), 1e-5), []);
    } finally {
      await app.close();
    }
  },
);

/** Waits through the page's own reload until the engine is up on an isolated page (or the
 *  time runs out); returns {isolated, engine}. */
async function settle(page, wantIsolated) {
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      const state = await page.evaluate(() => ({
        isolated: self.crossOriginIsolated,
        engine: window.medrank?.state?.engine || null,
      }));
      if (state.engine && (state.isolated === wantIsolated || Date.now() > deadline)) return state;
    } catch {
      // the page is navigating (its reload): ask again
    }
    if (Date.now() > deadline) throw new Error('the page did not settle');
    await new Promise((r) => setTimeout(r, 200));
  }
}

test(
  'a static host, first visit: one thread, then one reload, then N threads',
  { skip: (!haveModel && NO_MODEL) || (!haveThreads && NO_THREADS) },
  async () => {
    const server = await startStaticServer();
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: CHROMIUM_ARGS,
    });
    try {
      const context = await browser.newContext();
      await context.addInitScript(() => {
        const seen = JSON.parse(sessionStorage.getItem('test-loads') || '[]');
        seen.push(self.crossOriginIsolated);
        sessionStorage.setItem('test-loads', JSON.stringify(seen));
      });
      const page = await context.newPage();
      await page.goto(server.url);
      const { engine: info } = await settle(page, true);
      const loads = await page.evaluate(() => JSON.parse(sessionStorage.getItem('test-loads')));
      assert.deepEqual(loads, [false, true], 'the first load is not isolated; the service worker’s reload is');
      const cores = await page.evaluate(() => navigator.hardwareConcurrency);
      assert.equal(info.threads, cores);
      assert.equal(info.threadedBuild, true);
      await page.waitForTimeout(1500);
      assert.deepEqual(
        await page.evaluate(() => JSON.parse(sessionStorage.getItem('test-loads'))),
        [false, true],
        'no second reload',
      );
    } finally {
      await browser.close();
      server.stop();
    }
  },
);

test('a static host where no service worker runs: one thread, and the page says why', async () => {
  const app = await openApp({ staticServer: true, serviceWorkers: 'block' });
  try {
    const { page } = app;
    const info = await engine(page);
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
    assert.equal(info.threads, 1);
    assert.equal(info.threadedBuild, false);
    assert.equal(
      await page.textContent('#engine'),
      'engine: wasm (Web Worker) · CPU · 1 thread: this host does not allow shared memory (the page is not cross-origin isolated)',
    );
    await screenshot(page, 'one-thread');
  } finally {
    await app.close();
  }
});

test(
  'a random-weight BERT-base model (12 layers, hidden 768) loads and runs in the threaded build',
  { skip: (!haveModel && NO_MODEL) || (!haveThreads && NO_THREADS) },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'medrank-bert-base-'));
    execFileSync('python3', [join(ROOT, 'tests/browser/make_bert_base.py'), join(ROOT, MODEL), dir], {
      stdio: 'ignore',
    });
    const bundle = join(dir, 'small_bundle.jsonl');
    const lines = readFileSync(join(EXAMPLES, 'bundle.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.includes('"task": "mcqa"'))
      .slice(0, 2);
    writeFileSync(bundle, lines.join('\n') + '\n');
    const app = await openApp();
    try {
      const { page } = app;
      const info = await engine(page);
      assert.equal(info.threadedBuild, true);
      await page.setInputFiles('#file-input', [bundle]);
      await waitForChecks(page, 1);
      await page.check('input[name=model][value=local]');
      await page.setInputFiles(
        '#model-files',
        ['config.json', 'tokenizer.json', 'model.safetensors'].map((f) => join(dir, f)),
      );
      const { result } = await rankOnCpu(page);
      assert.equal(result.threads, info.threads);
      const systems = result.report.evaluators[0].report.tasks[0].systems;
      assert.ok(
        systems.length >= 2 && systems.every((s) => typeof s.rank === 'number'),
        JSON.stringify(systems.map((s) => s.system)),
      );
    } finally {
      await app.close();
    }
  },
);
