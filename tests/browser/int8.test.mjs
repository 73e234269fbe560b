// The int8 encoder in the browser (issue 26): every wasm build the site ships runs its int8
// kernels against the scheme's formula (the bench page's "Check the int8 kernels":
// `self_check('int8')`); the page's "8-bit (int8)" choice gives the CLI's `--precision int8`
// numbers within 1e-5 in the relaxed-SIMD and the plain single-threaded build (the integer
// sums are the same in every kernel, and every f32 step before a product rounds the same in
// wasm and natively: `Arithmetic::Reproducible`); int8 with the GPU forced is an error the user sees; a model folder
// picked from this computer is quantized as it loads; and an int8 run asks nothing but the
// site's own static files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  openApp,
  upload,
  setOptions,
  waitForChecks,
  cli,
  medrankBin,
  screenshot,
  differencesWithin,
  withoutPaths,
  withoutKernel,
  precisionOf,
  assertOwnStaticFilesOnly,
  ROOT,
  SITE,
  EXAMPLES,
} from './harness.mjs';

const MODEL = 'models/all-MiniLM-L6-v2';
const MODEL_INT8 = 'models/all-MiniLM-L6-v2-int8';
const haveModel = existsSync(join(SITE, MODEL, 'model.safetensors'));
// The site's 8-bit copy of the bundled model (the page loads it for int8 when it is there).
const siteInt8 = existsSync(join(SITE, MODEL_INT8, 'model.safetensors'));
const haveThreads = existsSync(join(SITE, 'pkg-threads/medrank_bg.wasm'));
const haveRelaxed = existsSync(join(SITE, 'pkg-threads-relaxed/medrank_bg.wasm'));
const NO_MODEL = 'no bundled model: run scripts/setup.sh model, then scripts/build-web.sh';
const NO_THREADS = 'the site has no threaded build (scripts/build-web.sh needs std sources)';

/** Does this medrank binary's `evaluate` take --precision? */
function cliHasPrecision() {
  try {
    return execFileSync(medrankBin(), ['evaluate', '--help'], { encoding: 'utf8' }).includes('--precision');
  } catch {
    return false;
  }
}
const NO_CLI_PRECISION = !cliHasPrecision() && 'this medrank binary has no `evaluate --precision`';

// ------------------------------------------------------------------ the kernels -------------

/** Opens bench.html (with `query`), runs "Check the int8 kernels", returns {kernels, engine}. */
async function int8Check(app, query = '') {
  const { page } = app;
  await page.goto(new URL(`bench.html${query}`, app.server.url).href);
  await page.click('#int8check-run');
  await page.waitForFunction(() => window.__int8Check || !document.querySelector('#int8check-error').hidden, null, {
    timeout: 120000,
  });
  const error = await page.$eval('#int8check-error', (e) => (e.hidden ? null : e.textContent));
  assert.equal(error, null, 'the int8 kernels equal the formula');
  const result = await page.evaluate(() => window.__int8Check);
  assert.match(await page.textContent('#int8check-summary'), /equal the formula on every shape/);
  return result;
}

test(
  'the int8 kernels of the relaxed-SIMD threaded build equal the formula (relaxed dot and SIMD128 dot)',
  { skip: !haveRelaxed && NO_THREADS },
  async () => {
    const app = await openApp();
    try {
      const { kernels, engine } = await int8Check(app);
      assert.equal(engine.threadedBuild, true);
      assert.equal(engine.relaxedSimd, true, 'Chromium validates relaxed SIMD');
      assert.deepEqual(kernels, ['portable', 'wasm-simd128-dot', 'wasm-relaxed-dot']);
    } finally {
      await app.close();
    }
  },
);

test(
  'the int8 kernels of the plain threaded build equal the formula (SIMD128 dot)',
  { skip: !haveThreads && NO_THREADS },
  async () => {
    const app = await openApp();
    try {
      // bench.html?simd=plain: the threaded build without relaxed SIMD.
      const { kernels, engine } = await int8Check(app, '?simd=plain');
      assert.equal(engine.threadedBuild, true);
      assert.equal(engine.relaxedSimd, false);
      assert.deepEqual(kernels, ['portable', 'wasm-simd128-dot']);
    } finally {
      await app.close();
    }
  },
);

test('the int8 kernels of the single-threaded build equal the formula (SIMD128 dot)', async () => {
  const app = await openApp();
  try {
    // One thread chosen in the app's Options: the worker loads pkg/.
    await app.page.evaluate(() => localStorage.setItem('medrank-threads', '1'));
    const { kernels, engine } = await int8Check(app);
    assert.equal(engine.threadedBuild, false);
    assert.equal(engine.threads, 1);
    assert.deepEqual(kernels, ['portable', 'wasm-simd128-dot']);
  } finally {
    await app.close();
  }
});

// ------------------------------------------------------------------ the page's int8 ---------

/** Choose `model` (bundled, or files picked from this computer), the backend and the
 *  precision, run "Rank systems"; the page's last result, or throws with its error. */
async function rankWith(page, { backend = 'cpu', precision = 'int8', modelFiles = null } = {}) {
  if (modelFiles) {
    await page.check('input[name=model][value=local]');
    await page.setInputFiles('#model-files', modelFiles);
  } else {
    await page.check('input[name=model][value=bundled]');
  }
  await page.selectOption('#opt-backend', backend);
  await page.selectOption('#opt-precision', precision);
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

/** The CLI's report and predictions: `medrank evaluate --precision int8` on the CPU with
 *  `args`, run in `cwd`; {report, predictions: Map "instance/system" -> probabilities in
 *  option order}. */
function cliRun(args, cwd = ROOT) {
  const out = mkdtempSync(join(tmpdir(), 'medrank-cli-int8-'));
  cli(
    [
      'evaluate',
      ...args,
      '--precision',
      'int8',
      '--backend',
      'cpu',
      '--seed',
      '0',
      '--json',
      join(out, 'report.json'),
      '--save-predictions',
      join(out, 'predictions.csv'),
      '--quiet',
    ],
    cwd,
  );
  const [head, ...rows] = readFileSync(join(out, 'predictions.csv'), 'utf8').trim().split('\n');
  const columns = head.split(',');
  const predictions = new Map();
  for (const row of rows) {
    const cells = row.split(',');
    const probs = columns.flatMap((c, i) => (c.startsWith('prob:') && cells[i] !== '' ? [Number(cells[i])] : []));
    predictions.set(`${cells[0]}/${cells[1]}`, probs);
  }
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
  rmSync(out, { recursive: true, force: true });
  return { report, predictions };
}

/** The page's probabilities per "instance/system" (its drill-down view), in option order. */
function pagePredictions(result) {
  const out = new Map();
  for (const inst of result.instances)
    for (const arg of inst.arguments)
      for (const p of arg.predictions)
        out.set(
          `${inst.id}/${arg.system}`,
          p.probs.map(([, x]) => x),
        );
  return out;
}

const ranks = (report) => report.evaluators[0].report.tasks.map((t) => t.systems.map((s) => [s.system, s.rank]));

/**
 * The page's int8 against the CLI's: every prediction within 1e-5, the same ranks and the
 * same report but for its numbers. Each product quantizes its f32 input rows to 7 bits, so a
 * last-bit difference in an input could move a value across a rounding boundary and one level
 * apart (MiniLM's few huge activation channels make a level coarse: 0.036 in a probability,
 * measured before the int8 path rounded reproducibly). So in int8 every f32 step before a
 * product (attention, softmax, GELU, layer norm) multiplies then adds in one order on every
 * target; the integer sums are exact in every kernel; only the steps after the last product
 * (pooling, the head) may differ in their last bits.
 */
function assertLikeTheCli(t, result, native) {
  const page = pagePredictions(result);
  assert.equal(page.size, native.predictions.size, 'the same predictions');
  let worst = [0, ''];
  for (const [key, probs] of native.predictions) {
    const mine = page.get(key);
    assert.ok(mine && mine.length === probs.length, `${key}: ${JSON.stringify(mine)} vs ${JSON.stringify(probs)}`);
    const d = Math.max(...probs.map((x, i) => Math.abs(mine[i] - x)));
    if (d > worst[0]) worst = [d, key];
    assert.ok(d <= 1e-5, `${key}: page ${JSON.stringify(mine)} vs CLI ${JSON.stringify(probs)}`);
  }
  t.diagnostic(`${page.size} predictions; the largest difference from the CLI's ${worst[0].toExponential(2)} (${worst[1]})`);
  assert.deepEqual(ranks(result.report), ranks(native.report));
  const pageReport = withoutKernel(withoutPaths(result.report));
  const nativeReport = withoutKernel(withoutPaths(native.report));
  // Every name, count, label, convention and number as the CLI's (1e-5 relative, as the f32
  // path is held).
  assert.deepEqual(differencesWithin(pageReport, nativeReport, 1e-5), []);
}

test(
  'int8 in the page agrees with medrank evaluate --precision int8 (MCQA + controls), says int8, asks only the site’s files',
  { skip: (!haveModel && NO_MODEL) || NO_CLI_PRECISION },
  async (t) => {
    // The page loads the site's 8-bit copy when there is one, else the f32 folder, quantized
    // as it loads (as the CLI quantizes it). The CLI reads the same folder of the site (run
    // there, it names the model as the page does).
    const model = siteInt8 ? MODEL_INT8 : MODEL;
    t.diagnostic(`the page's int8 model: ${model}`);
    const native = cliRun(
      [
        '--bundle',
        join(EXAMPLES, 'bundle.jsonl'),
        '--model',
        model,
        '--controls',
        '--corpus',
        join(EXAMPLES, 'corpus.jsonl'),
      ],
      SITE,
    );
    const app = await openApp();
    try {
      const { page, requests, server } = app;
      await upload(page, ['bundle.jsonl', 'corpus.jsonl']);
      const started = Date.now();
      const { result } = await rankWith(page, { precision: 'int8' });
      assert.equal(result.backend.backend, 'cpu');
      assert.equal(result.precision, 'int8');
      assert.match(await page.textContent('#backend-used'), /Ran on the CPU \(WebAssembly\) .*, in 8-bit \(int8\)$/);
      // The report's provenance says int8 and which wasm kernel summed the products.
      assert.match(precisionOf(result.report), /^int8 \(.*; wasm-(simd128|relaxed)-dot kernel\)$/);
      assert.match(precisionOf(native.report), /^int8 /);
      assert.equal(result.report.evaluators[0].evaluator, native.report.evaluators[0].evaluator);
      assertLikeTheCli(t, result, native);
      // The provenance view shows it.
      await page.click('#tabs [role=tab]:text-is("Provenance")');
      assert.match(await page.textContent('#results'), /precision: int8 \(/);
      await screenshot(page, 'int8-provenance');
      // Which folder the page fetched: the 8-bit copy's weights only, when the site has it.
      const fetched = requests.map((r) => new URL(r.url).pathname);
      assert.equal(fetched.includes(`/${MODEL_INT8}/model.safetensors`), siteInt8);
      assert.equal(fetched.includes(`/${MODEL}/model.safetensors`), !siteInt8);
      // Privacy: an int8 model run asks nothing but the site's own static files.
      assertOwnStaticFilesOnly(requests, new URL(server.url).origin, started);
    } finally {
      await app.close();
    }
  },
);

/** Two MCQA instances of the example bundle. */
function smallBundle() {
  const dir = mkdtempSync(join(tmpdir(), 'medrank-int8-'));
  const path = join(dir, 'small_bundle.jsonl');
  const lines = readFileSync(join(EXAMPLES, 'bundle.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"task": "mcqa"'))
    .slice(0, 2);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

test(
  'int8 with the GPU forced is an error the user sees; Auto runs int8 on the CPU and says why',
  { skip: !haveModel && NO_MODEL },
  async () => {
    const app = await openApp();
    try {
      const { page } = app;
      await page.setInputFiles('#file-input', [smallBundle()]);
      await waitForChecks(page, 1);
      await assert.rejects(
        rankWith(page, { backend: 'gpu', precision: 'int8' }),
        /GPU backend was requested but cannot run: int8 precision runs on the CPU path/,
      );
      const { result } = await rankWith(page, { backend: 'auto', precision: 'int8' });
      assert.equal(result.backend.backend, 'cpu');
      assert.match(result.backend.fallback_reason, /int8 precision runs on the CPU path/);
      // Said plainly, without advice to choose f32 "to use the GPU" on a machine that may
      // have none; the engine's reason behind the disclosure (issue 47, item 9).
      const said = await page.textContent('#backend-used');
      assert.match(
        said,
        /in 8-bit \(int8\)\. 8-bit \(int8\) arithmetic runs on the processor \(CPU\) only, so the model ran there\. Technical detailint8 precision runs on the CPU path/,
      );
      assert.equal((await page.textContent('#backend-used details')).startsWith('Technical detail'), true);
      // Back to f32 with the same page: the provenance says f32 again.
      const f32 = await rankWith(page, { backend: 'cpu', precision: 'f32' });
      assert.equal(precisionOf(f32.result.report), 'f32');
      assert.equal(f32.result.precision, 'f32');
    } finally {
      await app.close();
    }
  },
);

test(
  'a model folder picked from this computer is quantized as it loads: the CLI’s int8 numbers',
  { skip: (!haveModel && NO_MODEL) || NO_CLI_PRECISION },
  async (t) => {
    const bundle = smallBundle();
    // The picked files only (no pooling files), the CLI given a folder of the same three.
    const folder = mkdtempSync(join(tmpdir(), 'medrank-int8-model-'));
    const modelFiles = ['config.json', 'tokenizer.json', 'model.safetensors'].map((f) => {
      copyFileSync(join(SITE, MODEL, f), join(folder, f));
      return join(folder, f);
    });
    const native = cliRun(['--bundle', bundle, '--model', folder, '--controls']);
    const app = await openApp();
    try {
      const { page } = app;
      // In the single-threaded build: plain SIMD128, no fused multiply-add anywhere (the
      // test above runs the relaxed-SIMD threaded build, whose f32 path fuses).
      await page.evaluate(() => {
        document.querySelector('details.options').open = true;
        window.medrank.state.engine = null;
      });
      await page.fill('#opt-threads', '1');
      await page.dispatchEvent('#opt-threads', 'change');
      await page.setInputFiles('#file-input', [bundle]);
      await waitForChecks(page, 1);
      const { result } = await rankWith(page, { precision: 'int8', modelFiles });
      assert.equal(result.threads, 1);
      assert.match(precisionOf(result.report), /^int8 /);
      // The evaluator's name and the model's inputs are the pick's, not the CLI's path.
      native.report.evaluators[0].evaluator = result.report.evaluators[0].evaluator;
      native.report.provenance.inputs = result.report.provenance.inputs;
      native.report.evaluators[0].report.provenance.inputs = result.report.evaluators[0].report.provenance.inputs;
      assertLikeTheCli(t, result, native);
    } finally {
      await app.close();
      rmSync(folder, { recursive: true, force: true });
    }
  },
);

test(
  'the benchmark page times the CPU in int8 beside f32 (the smallest cell)',
  { skip: !haveModel && NO_MODEL },
  async () => {
    const app = await openApp();
    try {
      const { page } = app;
      await page.goto(new URL('bench.html', app.server.url).href);
      await page.selectOption('#bench-grid', 'small');
      await page.setChecked('#bench-gpu', false);
      await page.setChecked('#bench-int8', true);
      await page.click('#bench-run');
      await page.waitForFunction(
        () =>
          /Done/.test(document.querySelector('#bench-progress').textContent) ||
          !document.querySelector('#bench-error').hidden,
        null,
        { timeout: 300000 },
      );
      assert.equal(await page.isHidden('#bench-error'), true, await page.textContent('#bench-error'));
      const grid = await page.evaluate(() => window.__benchLast);
      const int8 = grid.find((b) => b.backend === 'wasm-cpu-int8');
      assert.equal(int8.precision, 'int8');
      assert.equal(grid.find((b) => b.backend === 'wasm-cpu').precision, 'f32');
      const cells = await page.locator('#bench-table tr[data-cell="128x1"] td').allTextContents();
      const f32 = Number(cells[3].replace(/,/g, ''));
      const q = Number(cells[10].replace(/,/g, ''));
      assert.ok(f32 > 0 && q > 0, `CPU f32 and int8 tokens/s: ${cells}`);
      assert.match(cells[11], /×$/);
      assert.match(await page.textContent('#bench-devices'), /CPU int8: medrank kernels/);
    } finally {
      await app.close();
    }
  },
);

// ------------------------------------------------------------------ precision said plainly --

/** The systems whose order differs between two rankings (system -> rank), as pairs "a|b"
 *  (a first in the first ranking's order): worked out here from the two replies. */
function changedPairs(before, after) {
  const out = [];
  const names = Object.keys(before);
  for (const [i, a] of names.entries())
    for (const b of names.slice(i + 1))
      if (Math.sign(before[a] - before[b]) !== Math.sign(after[a] - after[b])) out.push(`${a}|${b}`);
  return out;
}

test(
  'beside the 8-bit choice: its download and its measured accuracy cost; a ranking run in f32 and int8 says which systems changed places',
  { skip: (!haveModel && NO_MODEL) || (!siteInt8 && 'the site has no 8-bit copy of the bundled model') },
  async () => {
    // What `medrank quantize` wrote when it made the site's 8-bit copy (FORMATS.md §9).
    const q = JSON.parse(readFileSync(join(SITE, MODEL_INT8, 'quantization.json'), 'utf8'));
    const app = await openApp();
    try {
      const { page } = app;
      await page.waitForSelector('#int8-facts:not([hidden])');
      const facts = await page.textContent('#int8-facts');
      const mb = (n) => `${(n / 1024 / 1024).toFixed(1)} MB`;
      // The bundled copy: 24,061,584 against 90,868,376 bytes (22.9 and 86.7 MiB).
      assert.ok(facts.startsWith(`The bundled model in 8-bit downloads ${mb(q.int8_bytes)} against ${mb(q.f32_bytes)} in f32. `), facts);
      assert.match(facts, /Its accuracy cost, measured when the 8-bit copy was made \(medrank quantize\): /);
      if (q.dev) assert.match(facts, new RegExp(`dev accuracy ${q.dev.int8_accuracy.toFixed(3)} in int8 against ${q.dev.f32_accuracy.toFixed(3)} in f32`));
      else assert.match(facts, /no dev accuracy was measured/);
      assert.ok(
        facts.includes(`cosine of ${q.embeddings.mean_cosine.toFixed(4)} on average to the f32 model’s (worst ${q.embeddings.worst_cosine.toFixed(4)}, over ${q.embeddings.texts} texts)`),
        facts,
      );
      for (const o of q.system_order) {
        const rank = (order) => Object.fromEntries(order.map((s, i) => [s, i + 1]));
        const pairs = changedPairs(rank(o.f32_order), rank(o.int8_order)).map((p) => p.replace('|', ' and ') + ' swapped');
        const said = pairs.length
          ? `on ${o.bundle} (${o.task}) the order of the systems changed: ${pairs.join(', ')}`
          : `on ${o.bundle} (${o.task}) the systems kept their order`;
        assert.ok(facts.includes(said), `${said} in: ${facts}`);
        assert.equal(o.same, pairs.length === 0, 'the file’s own flag agrees');
      }

      // The same files ranked in f32, then in int8: the Ranking tab says what changed.
      await upload(page, ['bundle.jsonl', 'corpus.jsonl']);
      const f32 = await rankWith(page, { precision: 'f32' });
      assert.equal(await page.locator('.precision-change').count(), 0, 'one precision run: nothing to compare');
      const int8 = await rankWith(page, { precision: 'int8' });
      await page.click('#tabs [role=tab] >> nth=0');
      const note = page.locator('#results .precision-change');
      assert.equal(await note.count(), 1);
      const expected = [];
      // The same evaluators in the same order (the 8-bit copy's folder names its own).
      assert.deepEqual(f32.result.ranking.map((e) => e.task), int8.result.ranking.map((e) => e.task));
      for (const [i, ev] of f32.result.ranking.entries()) {
        const other = int8.result.ranking[i];
        const ranks = (e) => Object.fromEntries(e.systems.map((s) => [s.system, s.rank]));
        for (const p of changedPairs(ranks(ev), ranks(other))) expected.push(`${ev.evaluator} — ${ev.task}: ${p.split('|').join(' and ')} `);
      }
      const text = await note.textContent();
      if (expected.length) {
        assert.ok(text.startsWith('You ranked these files in 32-bit (f32) and in 8-bit (int8) arithmetic in this session, and the order changed.'), text);
        const items = await note.locator('li').allTextContents();
        assert.equal(items.length, expected.length, `${items}`);
        for (const [i, e] of expected.entries()) assert.ok(items[i].startsWith(e), `${items[i]} / ${e}`);
      } else {
        assert.equal(text, 'You ranked these files in 32-bit (f32) and in 8-bit (int8) arithmetic in this session: every system kept its place.');
      }
    } finally {
      await app.close();
    }
  },
);
