// The page as a hospital user meets it (issue 28): the checks that need no model run as files
// are added, before any model loads; the published Ranking-Over-Scoring files are taken by
// their public names; a control a file already is is not generated again, and a default
// that cannot run is said, as the CLI says it; a long run states what it will encode and a
// time left once measured, and its progress stays in view wherever the user scrolls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, run, setOptions, waitForChecks, scaledUpBundle, setUpLongRun, cli, differencesWithin, withoutPaths, ROOT, SITE, EXAMPLES } from './harness.mjs';

const MODEL = 'models/all-MiniLM-L6-v2';
const haveModel =
  existsSync(join(SITE, MODEL, 'model.safetensors')) && existsSync(join(ROOT, MODEL, 'model.safetensors'));
const skip = !haveModel && 'no bundled model: run scripts/setup.sh model, then scripts/build-web.sh';

// The published files' names: {language}.{split}_{dataset}_{system}.jsonl.
const PUBLISHED = {
  No_Argument: 'no_argument',
  'gpt-4o': 'gpt-4o',
  'llama-3-70b': 'llama-3-70b',
  Label_Only: 'label_only',
  Noise: 'noise',
};
const published = (system) => `en.test_casimedicos_${system}.jsonl`;

function publishedFiles() {
  const dir = mkdtempSync(join(tmpdir(), 'medrank-published-'));
  for (const [system, fixture] of Object.entries(PUBLISHED))
    copyFileSync(join(ROOT, 'tests/fixtures/ros_published', `${fixture}.jsonl`), join(dir, published(system)));
  return dir;
}

/** A request for a model's own files. The Options' int8 line reads the bundled 8-bit copy's
 *  quantization.json (what `medrank quantize` measured) when the page opens: a few hundred
 *  bytes of figures, not the model. */
const loadsAModel = (r) => r.url.includes('/models/') && !r.url.endsWith('/quantization.json');

test(
  'the published files are taken by their names; problems show before any model loads; no near-duplicate controls; the left-out default is said as the CLI says it',
  { skip },
  async () => {
    const dir = publishedFiles();
    const app = await openApp();
    try {
      const { page, requests } = app;
      await page.check('input[name=model][value=bundled]');
      await page.selectOption('#opt-backend', 'cpu');
      // Every control the inputs allow, as the CLI's bare --controls.
      await setOptions(page, { controls: 'all' });
      // Without the no-argument file: the check says so at once, in a sentence naming the files.
      const others = Object.keys(PUBLISHED).filter((s) => s !== 'No_Argument');
      await page.setInputFiles(
        '#file-input',
        others.map((s) => join(dir, published(s))),
      );
      await waitForChecks(page, others.length);
      await page.waitForSelector('#rank-check.bad');
      const problem = await page.textContent('#rank-check');
      assert.match(problem, /^Before ranking: The Ranking-Over-Scoring import needs the no-argument file/);
      assert.ok(problem.includes(`none of ${others.map(published).join(', ')} has the system no_argument`), problem);
      assert.equal(await page.isDisabled('#run-rank_systems'), true, 'the Rank button waits for the fix');
      assert.ok(!requests.some(loadsAModel), 'no model was loaded to find it');

      // With it: the names give each file its role (the prefix dropped, the base recognised in
      // any case, the control files ticked as controls).
      await page.setInputFiles('#file-input', [join(dir, published('No_Argument'))]);
      await waitForChecks(page, 5);
      await page.waitForFunction(() => document.querySelector('#rank-check')?.textContent.startsWith('Ready'));
      const system = (name) => page.inputValue(`tr[data-file="${name}"] input[aria-label^="system"]`);
      assert.equal(await system(published('No_Argument')), 'no_argument');
      assert.equal(await system(published('gpt-4o')), 'gpt-4o');
      assert.equal(await system(published('Label_Only')), 'Label_Only');
      for (const s of ['Label_Only', 'Noise'])
        assert.equal(await page.isChecked(`tr[data-file="${published(s)}"] input.control-case`), true, s);
      assert.equal(await page.isChecked(`tr[data-file="${published('gpt-4o')}"] input.control-case`), false);
      // What the run will encode, by hand: 6 questions x (4 systems + the generated
      // no_argument) contexts + 27 candidate options (option 5 is empty on 3 questions) = 57.
      const ready = await page.textContent('#rank-check');
      assert.ok(ready.includes('6 instances × 4 systems, plus the generated control no_argument'), ready);
      assert.ok(ready.includes('the bundled model encodes 57 sequences'), ready);
      assert.ok(
        ready.includes(
          'the label_only control was not generated: the bundle already has a control case from a file, `Label_Only`',
        ),
        ready,
      );
      assert.ok(ready.includes('the noise control was not generated'), ready);
      assert.ok(ready.includes('the ir_passages control was not added: it needs a corpus'), ready);
      assert.ok(!requests.some(loadsAModel), 'still no model loaded');

      await run(page, '#run-rank_systems');
      const report = await page.evaluate(() => window.medrank.state.lastResult.result.report);
      const ranked = report.evaluators[0].report.tasks[0].systems.map((s) => s.system);
      assert.deepEqual([...ranked].sort(), ['Label_Only', 'Noise', 'gpt-4o', 'llama-3-70b', 'no_argument']);
      const folded = ranked.map((s) => s.toLowerCase().replace(/[^a-z0-9]/g, ''));
      assert.equal(new Set(folded).size, folded.length, `near-duplicate systems: ${ranked}`);

      // The CLI on the same files says the same (one rule, the job layer's), and ranks alike.
      cli(
        [
          'import',
          'ranking-over-scoring',
          '--no-argument',
          published('No_Argument'),
          '--source',
          `gpt-4o=${published('gpt-4o')}`,
          '--source',
          `llama-3-70b=${published('llama-3-70b')}`,
          '--control-source',
          `Label_Only=${published('Label_Only')}`,
          '--control-source',
          `Noise=${published('Noise')}`,
          '--out',
          'imported_bundle.jsonl',
          '--quiet',
        ],
        dir,
      );
      cli(
        [
          'evaluate',
          '--bundle',
          'imported_bundle.jsonl',
          '--model',
          join(ROOT, MODEL),
          '--controls',
          '--backend',
          'cpu',
          '--seed',
          '0',
          '--json',
          'report.json',
          '--quiet',
        ],
        dir,
      );
      const expected = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
      const said = (r) => r.warnings.map((w) => w.message).filter((m) => /control was not (generated|added)/.test(m));
      assert.equal(said(report).length, 3);
      assert.deepEqual(said(report), said(expected));
      // The wasm and native CPU kernels add in different orders (encoder.test.mjs): 1e-5.
      assert.deepEqual(differencesWithin(withoutPaths(report), withoutPaths(expected), 1e-5), []);
    } finally {
      await app.close();
    }
  },
);

test(
  'a long run says what it will encode and its time left once measured, and its progress stays in view',
  { skip },
  async () => {
    const app = await openApp();
    try {
      const { page } = app;
      // 12 MCQA questions x 10 copies x 4 systems: 480 contexts and 600 options. How close
      // the time left comes is the estimate's unit test's (recorded batch timings, the same
      // Rust code: tests/integration/model_backend.rs) and the benchmark's (bench-estimate.mjs), never
      // a wall clock's here: this machine's speed is not the test's to know.
      await setUpLongRun(page, scaledUpBundle(10));
      assert.match(await page.textContent('#rank-check'), /encodes 1,080 sequences/);
      // Every change of the stage text, with the bar's position.
      await page.evaluate(() => {
        window.__stages = [];
        const stage = document.querySelector('#progress-stage');
        const bar = document.querySelector('#progress-bar');
        new MutationObserver(() =>
          window.__stages.push({ text: stage.textContent, done: bar.value, total: bar.max }),
        ).observe(stage, { childList: true, characterData: true, subtree: true });
      });
      await page.click('#run-rank_systems');
      // While it runs, the progress is in view at the bottom of the page and at its top.
      await page.waitForFunction(
        () => /Encoding with the model: [1-9]/.test(document.querySelector('#progress-stage').textContent),
        null,
        { timeout: 120000 },
      );
      for (const y of ['document.body.scrollHeight', '0']) {
        await page.evaluate(`window.scrollTo(0, ${y})`);
        const box = await page.locator('#progress-bar').boundingBox();
        const height = await page.evaluate(() => window.innerHeight);
        assert.ok(
          box && box.y >= 0 && box.y + box.height <= height,
          `progress out of view after scrolling to ${y}: ${JSON.stringify(box)}`,
        );
      }
      await page.waitForFunction(() => !window.medrank.state.running, null, { timeout: 600000 });
      assert.equal(await page.isHidden('#run-error'), true, await page.textContent('#run-error'));
      const stages = await page.evaluate(() => window.__stages);
      const encoding = stages.filter((s) => s.text.startsWith('Encoding with the model'));
      // First the tokenizing, then before the first batch the sequences and tokens; no rate
      // yet on a first run.
      assert.equal(encoding[0].text, 'Encoding with the model: splitting 1,080 sequences into tokens');
      const planned = encoding.find((s) => s.text.includes('tokens)'));
      assert.equal(planned.done, 0);
      assert.match(
        planned.text,
        /^Encoding with the model: 0 of 1,080 sequences \([\d.]+ [kM]? ?tokens\) · timing the first batches to estimate the time$/,
      );
      assert.equal(encoding.at(-1).done, encoding.at(-1).total);
      // Until 2 % of the work is done the first batches are timed; from then on every report
      // says the time left, in report::fmt_duration's words.
      const measuring = encoding.filter((s) => s.done > 0 && s.done < 0.02 * s.total);
      for (const s of measuring) assert.match(s.text, / · timing the first batches to estimate the time$/);
      const measured = encoding.filter((s) => s.done >= 0.02 * s.total && s.done < s.total);
      assert.ok(measured.some((s) => s.done >= 0.1 * s.total), JSON.stringify(encoding.slice(0, 5)));
      for (const s of measured)
        assert.match(
          s.text,
          /^Encoding with the model: [\d,]+ of 1,080 sequences \([\d.]+ [kM]? ?tokens\) · about (\d+ h )?(\d+ min )?\d+ s left$/,
        );

      // A second run of the kept model starts with an estimate at the first run's speed (and
      // is cancelled once it has said so).
      await page.evaluate(() => {
        window.__stages = [];
      });
      await page.click('#run-rank_systems');
      await page.waitForFunction(() => window.__stages.some((s) => s.text.includes('tokens)')), null, {
        timeout: 60000,
      });
      await page.click('#cancel');
      await page.waitForFunction(() => !window.medrank.state.running, null, { timeout: 60000 });
      const again = await page.evaluate(() =>
        window.__stages.filter((s) => s.text.startsWith('Encoding with the model')),
      );
      const plannedAgain = again.find((s) => s.text.includes('tokens)'));
      assert.match(
        plannedAgain.text,
        /^Encoding with the model: 0 of 1,080 sequences .* · about (\d+ h )?(\d+ min )?\d+ s at this model's last speed$/,
      );
    } finally {
      await app.close();
    }
  },
);
