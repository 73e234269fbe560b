// Grade on the Rubric tab (issue 27, part 2): the page grades the example rubric's
// ungraded responses (examples/rubric/conversations.jsonl) with a model folder picked from
// this computer as the grader, and gives `medrank grade`'s numbers: every P(met), every
// response's score, every system's mean, expected mean and interval within 1e-5; the graded
// file it exports is the CLI's --out but for float digits within 1e-5, its tables the CLI's
// --csv; a grade run asks nothing but the site's own static files; a model that cannot
// grade is an error the page shows, and the page goes on working. Loading the example
// keeps the Rubric job on its graded file: the file to grade has a kind of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { basename, join } from 'node:path';
import {
  openApp,
  upload,
  waitForChecks,
  run,
  openTab,
  screenshot,
  cli,
  cliHas,
  assertOwnStaticFilesOnly,
  trainFilledForm,
  differencesAbs,
  ROOT,
  EXAMPLES,
} from './harness.mjs';

const MODEL = 'models/all-MiniLM-L6-v2';
/** `text` as a regular expression matching it literally. */
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const RUBRIC = 'rubric/conversations.jsonl';
const haveModel = existsSync(join(ROOT, MODEL, 'model.safetensors'));
const SKIP = (!haveModel && 'no model in models/: run scripts/setup.sh model') ||
  (!cliHas('grade') && 'this medrank binary has no `grade`');
/** Numbers in [0, 1] (P(met), scores) computed by wasm and natively: f32 sums in another
 *  order, so the last digits may differ. */
const TOLERANCE = 1e-5;

/**
 * The graders the page is checked with: each a folder the CLI makes, which the page picks
 * (and names by the folder's name). A second grader is one more line.
 */
const GRADERS = [
  {
    // An NLI head (entailment, contradiction) trained on e-SNLI-mini's pairs, used zero-shot.
    folder: 'nli-grader',
    kind: 'zero_shot_nli',
    make: (dir) =>
      cli([
        'train', '--model', MODEL, '--train', 'data/esnli-mini/train.jsonl', '--dev', 'data/esnli-mini/dev.jsonl',
        '--task', 'nli', '--arguments', 'none', '--freeze', 'head', '--epochs', '3', '--out', dir,
      ]),
  },
  {
    // A criterion grader (met, not_met) trained on the example's physician labels (met_by).
    folder: 'criterion-grader',
    kind: 'criterion',
    make: (dir) =>
      cli(['train', '--model', MODEL, '--train', join(EXAMPLES, RUBRIC), '--dev-split', '0.25', '--task', 'criterion', '--epochs', '2', '--out', dir]),
  },
];

/** The CLI names the rubric and the grader's files by the paths it was given, the page by
 *  the file's and the folder's names; the order a front end lists its inputs in is not part
 *  of the result. */
function withoutPaths(report) {
  const copy = structuredClone(report);
  for (const f of copy.provenance.inputs) f.name = basename(f.name);
  copy.provenance.inputs.sort((x, y) => x.name.localeCompare(y.name) || x.sha256.localeCompare(y.sha256));
  copy.grader.model = basename(copy.grader.model);
  return copy;
}

/** A text with its numbers taken out: the text with each number replaced by `#`, and the
 *  numbers, so two files can be compared exactly but for their float digits. */
function skeleton(text) {
  const numbers = [];
  const shape = text.replace(/-?\d+(\.\d+)?([eE][-+]?\d+)?/g, (n) => {
    numbers.push(Number(n));
    return '#';
  });
  return { shape, numbers };
}

function assertSameButDigits(actual, expected, tol, what) {
  const a = skeleton(actual);
  const e = skeleton(expected);
  assert.equal(a.shape, e.shape, `${what}: the same text but for its numbers`);
  const far = a.numbers.flatMap((x, i) => (Math.abs(x - e.numbers[i]) <= tol ? [] : [`#${i}: ${x} vs ${e.numbers[i]}`]));
  assert.deepEqual(far, [], `${what}: numbers within ${tol}`);
}

/** Saves what clicking `selector` downloads; returns its text. */
async function downloaded(page, selector) {
  const download = page.waitForEvent('download');
  await page.click(selector);
  return readFileSync(await (await download).path(), 'utf8');
}

/** Picks the model folder `dir` as the model, on the CPU (the CLI's default backend). */
async function pickGrader(page, dir) {
  await page.check('input[name=model][value=local]');
  await page.setInputFiles('#model-folder', dir);
  await page.selectOption('#opt-backend', 'cpu');
}

for (const grader of GRADERS) {
  test(`the page grades the example rubric with ${grader.folder} as medrank grade does, asking only the site’s files`, { skip: SKIP }, async (t) => {
    const work = mkdtempSync(join(tmpdir(), 'medrank-grade-'));
    const dir = join(work, grader.folder);
    const app = await openApp();
    try {
      grader.make(dir);
      const out = join(work, 'cli');
      cli([
        'grade', '--rubric', join(EXAMPLES, RUBRIC), '--grader', dir, '--out', join(out, 'graded.jsonl'),
        '--json', join(out, 'report.json'), '--csv', join(out, 'csv'), '--seed', '0', '--resamples', '1000',
        '--confidence', '0.95', '--backend', 'cpu', '--quiet',
      ]);
      const expected = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
      assert.equal(expected.grader.kind, grader.kind);

      const { page, requests, server } = app;
      await upload(page, [RUBRIC]);
      const row = page.locator('tr[data-file="conversations.jsonl"]');
      assert.equal(await row.locator('select').inputValue(), 'rubric_responses');
      assert.match(await row.locator('td.check').textContent(), /12 responses to grade \(46 criteria\), 2 systems/);
      // Without a grader the button says what it needs.
      assert.equal(await page.isDisabled('#run-grade'), true);
      assert.match(await page.getAttribute('#run-grade', 'title'), /Needs a grader: choose a model under Model/);
      await pickGrader(page, dir);
      // The page's bootstrap options are the CLI's.
      assert.deepEqual(
        [await page.inputValue('#opt-seed'), await page.inputValue('#opt-resamples'), await page.inputValue('#opt-confidence')],
        ['0', '1000', '0.95'],
      );
      const started = Date.now();
      await run(page, '#run-grade');
      const { result } = await page.evaluate(() => window.medrank.state.lastResult);
      assert.equal(result.backend.backend, 'cpu');
      assert.match(await page.textContent('#backend-used'), /^Ran on the CPU \(WebAssembly\)/);

      // The report: every P(met) and met, every response's score, every system's mean,
      // expected mean and interval, every name and convention.
      const report = withoutPaths(result.report);
      const native = withoutPaths(expected);
      assert.equal(report.grader.model, grader.folder);
      assert.equal(report.criteria.length, 46);
      assert.ok(report.system_scores.every((s) => s.scores.every((m) => m.expected_mean != null)));
      assert.deepEqual(differencesAbs(report, native, TOLERANCE), []);
      const worst = Math.max(...report.criteria.map((c, i) => Math.abs(c.p_met - native.criteria[i].p_met)));
      t.diagnostic(`the largest P(met) difference from the CLI's: ${worst.toExponential(2)}`);

      // The Criteria tab draws the page's numbers: the grader, each criterion's P(met).
      await openTab(page, 'Criteria');
      const panel = page.locator('#panels [role=tabpanel]:not([hidden])');
      assert.match(await panel.locator('.grader').textContent(), new RegExp(`^Grader: ${grader.folder} `));
      const shown = await panel.locator('td[data-col=p_met]').allTextContents();
      assert.deepEqual(shown, result.report.criteria.map((c) => c.p_met.toFixed(3)));
      assert.equal(await panel.locator('[data-stat=truncation]').count(), result.report.truncated.length ? 1 : 0);
      await screenshot(page, `grade-criteria-${grader.folder}`);
      // The graded file it downloads is the reply's, and the CLI's --out but for float digits.
      const graded = await downloaded(page, '#panels [role=tabpanel]:not([hidden]) [data-export="conversations.graded.jsonl"]');
      assert.equal(graded, result.grade_view.graded_jsonl);
      assertSameButDigits(graded, readFileSync(join(out, 'graded.jsonl'), 'utf8'), TOLERANCE, 'the graded file');

      // The Scores tab: a row per system and score, the overall means charted.
      await openTab(page, 'Scores');
      const scoreRows = result.report.system_scores.reduce((n, s) => n + s.scores.length, 0);
      assert.equal(await panel.locator('table.rubric-scores tbody tr').count(), scoreRows);
      for (const s of result.report.system_scores) {
        const overall = s.scores.find((m) => m.score === 'overall');
        const cells = panel.locator(`tr[data-score=overall][data-system="${s.system}"]`);
        assert.equal(await cells.locator('[data-col=mean]').textContent(), overall.mean.toFixed(3));
        assert.equal(await cells.locator('[data-col=expected]').textContent(), overall.expected_mean.toFixed(3));
        assert.equal(
          await cells.locator('[data-col=interval]').textContent(),
          `${overall.interval.lo.toFixed(3)} – ${overall.interval.hi.toFixed(3)}`,
        );
      }
      await screenshot(page, `grade-scores-${grader.folder}`);

      // Tables & export: each table's CSV is the CLI's --csv (4 decimals: a last-digit
      // difference may round apart), the JSON report the reply's.
      await openTab(page, 'Tables & export');
      const names = result.tables.map((x) => x.name);
      assert.deepEqual(names.slice(0, 3), ['grade_criteria', 'rubric_responses', 'rubric_systems']);
      for (const table of result.tables)
        assertSameButDigits(table.csv, readFileSync(join(out, 'csv', `${table.name}.csv`), 'utf8'), 1.5e-4, `${table.name}.csv`);
      assert.equal(await downloaded(page, '[data-export="rubric_systems.csv"]'), result.tables[2].csv);
      assert.deepEqual(JSON.parse(await downloaded(page, '#download-json')), result.report);

      // Privacy: grading asked nothing but the site's own static files.
      assertOwnStaticFilesOnly(requests, new URL(server.url).origin, started);
    } finally {
      await app.close();
      rmSync(work, { recursive: true, force: true });
    }
  });
}

test('a model without a grader’s head is an error the page shows; the page goes on working', { skip: SKIP }, async () => {
  const app = await openApp();
  try {
    const { page, consoleErrors } = app;
    await upload(page, [RUBRIC, 'rubric/graded.jsonl']);
    await pickGrader(page, join(ROOT, MODEL));
    await assert.rejects(
      run(page, '#run-grade'),
      /the page reported: all-MiniLM-L6-v2 has no sequence-classification head: a grader is a model trained with `medrank train --task criterion`, or an NLI model \(its labels name `entailment`\)/,
    );
    await screenshot(page, 'grade-no-head');
    // Nothing broke: the buttons are back, and the Rubric job scores the graded file.
    assert.equal(await page.isEnabled('#run-grade'), true);
    await run(page, '#run-rubric');
    const { job, result } = await page.evaluate(() => window.medrank.state.lastResult);
    assert.equal(job, 'rubric');
    assert.equal(result.report.provenance.inputs[0].name, 'graded.jsonl');
    assert.deepEqual(consoleErrors, []);
  } finally {
    await app.close();
  }
});

test('the example loads the file to grade with its own kind: Rubric still scores the graded file', async () => {
  const app = await openApp();
  try {
    const { page } = app;
    await page.click('#load-example-2');
    await waitForChecks(page, 4);
    const kind = (name) => page.locator(`tr[data-file="${name}"] select`).inputValue();
    assert.equal(await kind('rubric/conversations.jsonl'), 'rubric_responses');
    assert.equal(await kind('rubric/graded.jsonl'), 'rubric');
    for (const name of ['rubric/conversations.jsonl', 'rubric/graded.jsonl'])
      assert.match(await page.locator(`tr[data-file="${name}"] td.check`).textContent(), /^✓ /, name);
    await run(page, '#run-rubric');
    const { result } = await page.evaluate(() => window.medrank.state.lastResult);
    assert.deepEqual(result.report.provenance.inputs.map((f) => f.name), ['rubric/graded.jsonl']);
    await openTab(page, 'Scores');
    assert.ok((await page.locator('table.rubric-scores tbody tr').count()) > 0);
  } finally {
    await app.close();
  }
});

test('a criterion grader trained in the page grades there with its quality beside every verdict (not chosen for the user at its baseline), and its download grades the same in the CLI', { skip: SKIP }, async () => {
  const work = mkdtempSync(join(tmpdir(), 'medrank-grade-train-'));
  const app = await openApp();
  try {
    const { page } = app;
    // The training form takes the rubric file and offers the criterion task only.
    await page.selectOption('#opt-backend', 'cpu');
    await page.setInputFiles('#train-file', join(EXAMPLES, RUBRIC));
    await page.waitForFunction(() => /responses, rubric file/.test(document.querySelector('#train-file-info').textContent), null, {
      timeout: 30000,
    });
    assert.equal(await page.inputValue('#train-task'), 'criterion');
    assert.deepEqual(
      await page.$$eval('#train-task option:not([disabled])', (os) => os.map((o) => o.value)),
      ['criterion'],
    );
    await page.check('input[name=train-dev][value=split]');
    for (const [id, v] of [['#train-dev-split', 0.25], ['#train-epochs', 3], ['#train-batch', 8], ['#train-seed', 7], ['#train-name', 'page-grader']])
      await page.fill(id, String(v));
    const { stored, report: trained } = await trainFilledForm(page);
    // Trained on 34 criteria, it does no better on its 12 dev examples than always saying the
    // majority class (the grader: 0.3333 against 1.0): kept, listed as not to be
    // trusted, and not chosen for the user.
    const quality = trained.quality;
    assert.match(quality.untrusted, /^its dev macro-F1 \d\.\d{3} is no better than the majority-class baseline \(\d\.\d{3}\)$/);
    assert.notEqual(await page.inputValue('input[name=model]:checked'), `trained:${stored.id}`);
    assert.match(
      await page.textContent('#train-result'),
      new RegExp(`Kept in this browser as “page-grader” but not chosen as the model above: its results are not to be trusted \\(${escape(quality.untrusted)}\\)\\.`),
    );
    assert.equal(
      (await page.textContent(`label:has(input[value="trained:${stored.id}"])`)).trim(),
      `Trained in this browser: page-grader (criterion, dev macro-F1 ${quality.dev_metric.toFixed(3)} — not to be trusted)`,
    );
    // Picked by hand, it grades; every tab of the result says how far to trust it.
    await page.check(`input[name=model][value="trained:${stored.id}"]`);
    await upload(page, [RUBRIC]);
    await run(page, '#run-grade');
    const { result } = await page.evaluate(() => window.medrank.state.lastResult);
    assert.equal(result.report.grader.kind, 'criterion');
    assert.deepEqual(result.report.model_quality, quality);
    assert.equal(
      await page.textContent('[data-view="criteria"] .model-quality'),
      `Model quality: ${quality.text}. Not to be trusted: ${quality.untrusted}.`,
    );
    assert.equal(await page.getAttribute('[data-view="criteria"] .model-quality', 'data-trusted'), 'false');
    assert.match(quality.text, /^dev macro-F1 \d\.\d{3} \(the majority-class baseline \d\.\d{3}; dev accuracy \d\.\d{3}, chance accuracy 0\.500, majority-class accuracy \d\.\d{3}\) on 12 dev examples, trained on 34$/);
    await page.click('#tabs [role=tab]:has-text("Warnings (")');
    assert.ok(
      result.report.warnings.some((w) => w.message === `the model's results are not to be trusted: ${quality.untrusted} (${quality.text}); train it on more data or use another model`),
      JSON.stringify(result.report.warnings),
    );
    assert.match(await page.textContent('[data-view="warnings"]'), /the model's results are not to be trusted/);
    // Each verdict is drawn good or bad for the response: a met penalty (negative points)
    // is bad, an unmet one good.
    await openTab(page, 'Criteria');
    const verdicts = await page.$$eval('table.grade-criteria tr[data-index]', (rows) =>
      rows.map((r) => {
        const cell = r.querySelector('td[data-col=verdict]');
        return {
          key: `${r.dataset.response}|${r.dataset.system}|${r.dataset.index}`,
          text: cell.textContent,
          bad: cell.classList.contains('status-bad'),
          good: cell.classList.contains('status-ok'),
        };
      }),
    );
    const criteria = result.report.criteria;
    assert.equal(verdicts.length, criteria.length);
    assert.ok(criteria.some((c) => c.points < 0), 'the example has penalty criteria');
    for (const c of criteria) {
      const good = c.met === c.points > 0;
      const shown = verdicts.find((v) => v.key === `${c.id}|${c.system}|${c.index}`);
      assert.deepEqual(
        shown,
        { key: `${c.id}|${c.system}|${c.index}`, text: `${c.met ? 'met' : 'not met'} · ${good ? 'good' : 'bad'} for the response`, bad: !good, good },
        `${c.criterion} (${c.points} points)`,
      );
    }

    // Its .zip is a model folder the CLI grades with to the page's numbers.
    const download = page.waitForEvent('download');
    await page.click(`button[data-download="${stored.id}"]`);
    const zip = join(work, 'grader.zip');
    await (await download).saveAs(zip);
    execFileSync('python3', ['-m', 'zipfile', '-e', zip, work]);
    const folder = join(work, 'page-grader');
    assert.equal(JSON.parse(readFileSync(join(folder, 'train_log.json'), 'utf8')).task, 'criterion');
    const json = join(work, 'report.json');
    cli(['grade', '--rubric', join(EXAMPLES, RUBRIC), '--grader', folder, '--json', json, '--seed', '0', '--quiet']);
    const native = withoutPaths(JSON.parse(readFileSync(json, 'utf8')));
    const report = withoutPaths(result.report);
    // The page names its kept evaluator; the CLI the folder it was given.
    report.grader.model = native.grader.model;
    assert.deepEqual(differencesAbs(report, native, TOLERANCE), []);
  } finally {
    await app.close();
    rmSync(work, { recursive: true, force: true });
  }
});

test('the page checks answers against expert statements with an NLI model as medrank statements does, asking only the site’s files', { skip: SKIP }, async () => {
  const work = mkdtempSync(join(tmpdir(), 'medrank-statements-'));
  const dir = join(work, 'nli-grader');
  const app = await openApp();
  try {
    GRADERS[0].make(dir); // the NLI head: entailment and contradiction
    const json = join(work, 'report.json');
    cli([
      'statements', '--input', join(EXAMPLES, 'statements/answers.jsonl'), '--nli', dir, '--json', json, '--seed', '0',
      '--backend', 'cpu', '--quiet',
    ]);
    const native = JSON.parse(readFileSync(json, 'utf8'));
    const { page, requests, server } = app;
    await upload(page, ['statements/answers.jsonl']);
    const row = page.locator('tr[data-file="answers.jsonl"]');
    assert.equal(await row.locator('select').inputValue(), 'statement_answers');
    assert.match(await row.locator('td.check').textContent(), /6 answers \(18 statements\), 2 systems/);
    await pickGrader(page, dir);
    const started = Date.now();
    await run(page, '#run-statements');
    const { result } = await page.evaluate(() => window.medrank.state.lastResult);
    const report = structuredClone(result.report);
    const expected = structuredClone(native);
    for (const r of [report, expected]) {
      for (const f of r.provenance.inputs) f.name = basename(f.name);
      r.provenance.inputs.sort((x, y) => x.name.localeCompare(y.name) || x.sha256.localeCompare(y.sha256));
      r.model = basename(r.model);
    }
    assert.equal(report.judgements.length, 18);
    assert.deepEqual(differencesAbs(report, expected, TOLERANCE), []);
    // The Statements tab draws the report: a row per system and figure, each judgement.
    await openTab(page, 'Statements');
    const panel = page.locator('#panels [role=tabpanel]:not([hidden])');
    assert.equal(await panel.locator('table.statement-systems tbody tr').count(), 6);
    assert.deepEqual(
      await panel.locator('td[data-col=p_entailment]').allTextContents(),
      result.report.judgements.map((j) => j.p_entailment.toFixed(3)),
    );
    await screenshot(page, 'statements');
    assertOwnStaticFilesOnly(requests, new URL(server.url).origin, started);
  } finally {
    await app.close();
    rmSync(work, { recursive: true, force: true });
  }
});

/** Criteria tab's line on the grader's agreement with the people's `met_by`, written from
 *  `medrank rubric-agreement --json`'s numbers (its `all` group). */
function peopleLineOf(report) {
  const all = report.groups[0];
  const g = all.grader;
  const who = report.human_graders.length === 1 ? report.human_graders[0] : `${report.human_graders.length} people (${report.human_graders.join(', ')})`;
  return `Cohen's κ ${g.kappa.toFixed(3)} (0 = chance, 1 = full agreement) and macro-F1 ${g.macro_f1.toFixed(3)} against ${who} on the ${all.items} criteria judged, over ${g.pairs} pairs of labels`;
}

test('beside the grader’s verdicts, its agreement with the people who judged the same criteria, marked in the tab and in Warnings at or below chance (issue 47, item 1)', { skip: SKIP }, async () => {
  const work = mkdtempSync(join(tmpdir(), 'medrank-grade-people-'));
  const app = await openApp();
  try {
    const grader = join(work, 'criterion-grader');
    GRADERS.find((g) => g.folder === 'criterion-grader').make(grader);
    // The CLI's verdicts, and its agreement with physician-1 (`met_by` of every criterion).
    const graded = join(work, 'graded.jsonl');
    cli(['grade', '--rubric', join(EXAMPLES, RUBRIC), '--grader', grader, '--out', graded, '--seed', '0', '--backend', 'cpu', '--quiet']);
    const agreement = (rubric) => {
      const json = join(work, `${basename(rubric)}.agreement.json`);
      cli(['rubric-agreement', '--input', rubric, '--grader-file', graded, '--json', json, '--quiet']);
      return JSON.parse(readFileSync(json, 'utf8'));
    };
    // The same responses, judged by a physician who says the opposite of the grader on
    // every criterion: the grader agrees with them less than chance.
    const verdicts = readFileSync(graded, 'utf8').trim().split('\n').map((l) => JSON.parse(l).criteria.map((c) => c.met));
    const opposite = readFileSync(join(EXAMPLES, RUBRIC), 'utf8').trim().split('\n').map((l, i) => {
      const r = JSON.parse(l);
      r.criteria.forEach((c, j) => {
        c.met_by = { 'physician-1': !verdicts[i][j] };
      });
      return JSON.stringify(r);
    });
    const disagreeing = join(work, 'disagreeing.jsonl');
    writeFileSync(disagreeing, opposite.join('\n') + '\n');

    const { page } = app;
    await pickGrader(page, grader);
    const criteriaLine = () => page.locator('[data-view="criteria"] p.people-agreement');
    for (const [rubric, trusted] of [[join(EXAMPLES, RUBRIC), true], [disagreeing, false]]) {
      const expected = agreement(rubric);
      const kappa = expected.groups[0].grader.kappa;
      assert.equal(kappa > 0.005, trusted, `κ ${kappa}`);
      const why = `its Cohen's κ ${kappa.toFixed(3)} is no better than chance (0): it agrees with people's judgements no more than labels drawn at random would`;
      const line = `Agreement with people’s judgements: ${peopleLineOf(expected)}.` + (trusted ? '' : ` Not to be trusted: ${why}.`);
      await page.evaluate(() => {
        window.medrank.state.files = [];
      });
      await page.setInputFiles('#file-input', [rubric]);
      await waitForChecks(page, 1);
      await run(page, '#run-grade');
      // In the Criteria tab, above the verdicts, and again atop the Agreement tab.
      await openTab(page, 'Criteria');
      assert.equal(await criteriaLine().textContent(), line);
      assert.equal(await criteriaLine().getAttribute('data-trusted'), String(trusted));
      assert.equal(await criteriaLine().evaluate((p) => p.classList.contains('bad')), !trusted);
      await openTab(page, 'Agreement');
      assert.equal(
        await page.textContent('[data-view="agreement"] p.people-agreement'),
        line.replace(/^Agreement with people’s judgements: /, 'The grader against the people: '),
      );
      // Warnings: the CLI's warning, word for word, only when at chance.
      const warning = `the grader's verdicts are not to be trusted: ${why} (${peopleLineOf(expected)})`;
      assert.equal(expected.warnings.some((w) => w.message === warning), !trusted, JSON.stringify(expected.warnings));
      await page.click('#tabs [role=tab]:has-text("Warnings (")');
      assert.equal((await page.textContent('[data-view="warnings"]')).includes(warning), !trusted);
    }
  } finally {
    await app.close();
    rmSync(work, { recursive: true, force: true });
  }
});
