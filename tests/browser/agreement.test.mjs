// Agreement in the page (the rubric grader against people, HealthBench's meta-evaluation):
// on the example's people (examples/rubric/judged.jsonl) and grader (grader.jsonl) the page
// gives `medrank rubric-agreement --json` — every group's grader and per-person macro-F1 and
// kappa, as the reply holds them and as the tab draws them, within 1e-12, an undefined
// figure drawn as undefined — its CSV downloads are the CLI's --csv byte for byte, the same
// without a grader file (the people only), and the run asks nothing but the site's own
// static files. Loading the example brings both files with their own kinds, and Rubric
// still scores the graded file. Grade on a file whose criteria carry people's met_by
// (examples/rubric/conversations.jsonl) also sets the grader it ran against them: the
// figures of `medrank rubric-agreement` on the CLI's `grade --out` file.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  openApp,
  upload,
  waitForChecks,
  run,
  openTab,
  screenshot,
  cli,
  differences,
  assertOwnStaticFilesOnly,
  EXAMPLES,
  ROOT,
} from './harness.mjs';

const JUDGED = 'rubric/judged.jsonl';
const GRADER = 'rubric/grader.jsonl';

let app;
before(async () => {
  app = await openApp();
});
after(async () => {
  await app?.close();
});

/** `medrank rubric-agreement` on the examples: its --json report and its --csv folder. */
function cliAgreement(withGrader) {
  const out = mkdtempSync(join(tmpdir(), 'medrank-agreement-'));
  cli([
    'rubric-agreement',
    '--input',
    join(EXAMPLES, JUDGED),
    ...(withGrader ? ['--grader-file', join(EXAMPLES, GRADER)] : []),
    '--json',
    join(out, 'r.json'),
    '--csv',
    join(out, 'csv'),
    '--quiet',
  ]);
  return { report: JSON.parse(readFileSync(join(out, 'r.json'), 'utf8')), csv: join(out, 'csv') };
}

/** The CLI names its inputs by the paths it was given, the page by the file names (in the
 *  provenance and in the warnings' locations). */
const baseNames = (report) => {
  const c = structuredClone(report);
  c.provenance.inputs.forEach((f) => {
    f.name = f.name.split('/').pop();
  });
  c.warnings.forEach((w) => {
    if (w.location?.file) w.location.file = w.location.file.split('/').pop();
  });
  return c;
};

/** A number equal to the CLI's within 1e-12 (relative to the larger, at least 1). */
const close = (a, b) =>
  typeof a === 'number' && typeof b === 'number' && Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(a), Math.abs(b));

/** A drawn figure against the CLI's `Stat`: the exact value the cell carries, or the same
 *  undefined reason (and a cell that says "undefined", never 0 or NaN). */
function assertCell(cell, expected, what) {
  assert.ok(cell, `${what}: no cell`);
  if (expected && typeof expected === 'object') {
    assert.equal(cell.undefined, expected.undefined, what);
    assert.equal(cell.text, `undefined (${expected.undefined})`, what);
    // Said in words a reader knows (issue 47, item 9), not as "`met` never said by the rater".
    assert.doesNotMatch(cell.text, /`|never said/, what);
  } else {
    assert.ok(close(Number(cell.value), expected), `${what}: ${cell.value} vs ${expected}`);
    assert.doesNotMatch(cell.text, /NaN|undefined/, what);
  }
}

/** What the Agreement tab draws: per group and rater, each figure cell's text and its
 *  exact value (data-value) or undefined reason (data-undefined). */
async function drawnFigures(page) {
  return page.evaluate(() => {
    const cells = (row) =>
      Object.fromEntries(
        [...row.querySelectorAll('td[data-col]')].map((td) => [
          td.dataset.col,
          { text: td.textContent, value: td.dataset.value, undefined: td.dataset.undefined },
        ]),
      );
    const groups = {};
    for (const row of document.querySelectorAll('table.rubric-agreement tbody tr'))
      groups[row.dataset.group] = cells(row);
    const raters = {};
    for (const row of document.querySelectorAll('table.rubric-agreement-raters tbody tr'))
      raters[`${row.dataset.group}|${row.dataset.rater}`] = cells(row);
    return { groups, raters };
  });
}

/** Every group's grader and per-person macro-F1 and kappa: in the reply and as drawn. */
function assertFigures(result, drawn, expected, withGrader, { someUndefined = true } = {}) {
  const report = result.report;
  assert.deepEqual(
    report.groups.map((g) => g.group),
    expected.groups.map((g) => g.group),
  );
  assert.equal(expected.groups[0].group, 'all');
  let undefinedSeen = 0;
  for (const [i, want] of expected.groups.entries()) {
    const got = report.groups[i];
    const g = want.group;
    assert.equal(got.items, want.items, `${g} items`);
    if (withGrader) {
      for (const f of ['macro_f1', 'kappa']) {
        const w = want.grader[f];
        if (typeof w === 'number') assert.ok(close(got.grader[f], w), `${g} grader ${f}: ${got.grader[f]} vs ${w}`);
        else assert.deepEqual(got.grader[f], w, `${g} grader ${f}`);
        assertCell(drawn.groups[g][f], w, `${g}: the grader's ${f} as drawn`);
        assertCell(drawn.raters[`${g}|(grader)`][f], w, `${g}: the grader's ${f} in the raters' table`);
      }
      assert.equal(got.grader.pairs, want.grader.pairs, `${g} grader pairs`);
    } else {
      assert.equal(got.grader, undefined, `${g}: no grader without a grader file`);
      assert.equal(drawn.groups[g].macro_f1, undefined, `${g}: no grader column`);
    }
    assert.deepEqual(
      got.humans.map((h) => h.grader),
      want.humans.map((h) => h.grader),
      `${g} people`,
    );
    for (const [k, h] of want.humans.entries()) {
      for (const f of ['macro_f1', 'kappa']) {
        const w = h.agreement[f];
        const v = got.humans[k].agreement[f];
        if (typeof w === 'number') assert.ok(close(v, w), `${g} ${h.grader} ${f}: ${v} vs ${w}`);
        else {
          assert.deepEqual(v, w, `${g} ${h.grader} ${f}`);
          undefinedSeen++;
        }
        assertCell(drawn.raters[`${g}|${h.grader}`][f], w, `${g}: ${h.grader}'s ${f} as drawn`);
      }
    }
    for (const f of ['human_mean_macro_f1', 'human_mean_kappa']) assertCell(drawn.groups[g][f], want[f], `${g} ${f}`);
  }
  // The example has a person whose macro-F1 is undefined in one group: it must show so.
  if (someUndefined) assert.ok(undefinedSeen > 0, 'an undefined figure was checked');
}

/** Downloads every table's CSV from Tables & export and compares it with the CLI's --csv. */
async function assertCsvDownloads(page, result, csvDir) {
  await openTab(page, 'Tables & export');
  assert.deepEqual(
    result.tables.map((t) => t.name),
    ['rubric_agreement', 'rubric_agreement_humans'],
  );
  for (const t of result.tables) {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(`[data-export="${t.name}.csv"]`)]);
    assert.equal(download.suggestedFilename(), `${t.name}.csv`);
    const got = readFileSync(await download.path(), 'utf8');
    assert.equal(got, readFileSync(join(csvDir, `${t.name}.csv`), 'utf8'), `${t.name}.csv`);
  }
}

for (const withGrader of [true, false]) {
  const what = withGrader ? 'with the grader file' : 'the people only (no grader file)';
  test(`Agreement in the browser equals medrank rubric-agreement --json and --csv, ${what}`, async () => {
    const expected = cliAgreement(withGrader);
    const { page, requests, server } = app;
    await page.click('#clear-files');
    const files = withGrader ? [JUDGED, GRADER] : [JUDGED];
    await upload(page, files);
    // Each file's kind is guessed: the people's judgements, and the grader's by its name.
    const kind = (name) => page.locator(`tr[data-file="${name}"] select`).inputValue();
    assert.equal(await kind('judged.jsonl'), 'rubric_judged');
    if (withGrader) assert.equal(await kind('grader.jsonl'), 'rubric_grader');
    for (const f of files) {
      const name = f.split('/').pop();
      assert.match(await page.locator(`tr[data-file="${name}"] td.check`).textContent(), /^✓ /, name);
    }
    const started = Date.now();
    await run(page, '#run-rubric_agreement');
    const { result } = await page.evaluate(() => window.medrank.state.lastResult);
    // The whole report, within 1e-12 (file names aside).
    assert.deepEqual(differences(baseNames(result.report), baseNames(expected.report)), []);
    await openTab(page, 'Agreement');
    assertFigures(result, await drawnFigures(page), expected.report, withGrader);
    await screenshot(page, `15-agreement-${withGrader ? 'grader' : 'people'}`);
    await assertCsvDownloads(page, result, expected.csv);
    assertOwnStaticFilesOnly(requests, new URL(server.url).origin, started);
  });
}

test('the example loads the judged and the grader file with their own kinds: Rubric still scores the graded file', async () => {
  const { page } = app;
  await page.click('#clear-files');
  await page.click('#load-example-2');
  await waitForChecks(page, 6);
  const kind = (name) => page.locator(`tr[data-file="${name}"] select`).inputValue();
  assert.equal(await kind(JUDGED), 'rubric_judged');
  assert.equal(await kind(GRADER), 'rubric_grader');
  assert.equal(await kind('rubric/graded.jsonl'), 'rubric');
  assert.equal(await kind('rubric/conversations.jsonl'), 'rubric_responses');
  for (const name of [JUDGED, GRADER, 'rubric/graded.jsonl'])
    assert.match(await page.locator(`tr[data-file="${name}"] td.check`).textContent(), /^✓ /, name);
  await run(page, '#run-rubric_agreement');
  let { result } = await page.evaluate(() => window.medrank.state.lastResult);
  assert.deepEqual(
    result.report.provenance.inputs.map((f) => f.name),
    [JUDGED, GRADER],
  );
  await run(page, '#run-rubric');
  ({ result } = await page.evaluate(() => window.medrank.state.lastResult));
  assert.deepEqual(
    result.report.provenance.inputs.map((f) => f.name),
    ['rubric/graded.jsonl'],
  );
});

const MODEL = 'models/all-MiniLM-L6-v2';
const TO_GRADE = 'rubric/conversations.jsonl';
const NO_MODEL =
  !existsSync(join(ROOT, MODEL, 'model.safetensors')) && 'no model in models/: run scripts/setup.sh model';

test(
  'Grade on a file with people’s judgements shows the grader against them, as medrank rubric-agreement on the graded file',
  { skip: NO_MODEL },
  async () => {
    // A criterion grader trained on the example's physician labels (as grade.test.mjs makes it).
    const work = mkdtempSync(join(tmpdir(), 'medrank-grade-agreement-'));
    const dir = join(work, 'criterion-grader');
    cli([
      'train',
      '--model',
      MODEL,
      '--train',
      join(EXAMPLES, TO_GRADE),
      '--dev-split',
      '0.25',
      '--task',
      'criterion',
      '--epochs',
      '2',
      '--out',
      dir,
    ]);
    const graded = join(work, 'graded.jsonl');
    cli([
      'grade',
      '--rubric',
      join(EXAMPLES, TO_GRADE),
      '--grader',
      dir,
      '--out',
      graded,
      '--backend',
      'cpu',
      '--quiet',
    ]);
    cli([
      'rubric-agreement',
      '--input',
      join(EXAMPLES, TO_GRADE),
      '--grader-file',
      graded,
      '--json',
      join(work, 'r.json'),
      '--csv',
      join(work, 'csv'),
      '--quiet',
    ]);
    const expected = JSON.parse(readFileSync(join(work, 'r.json'), 'utf8'));

    const { page } = app;
    await page.click('#clear-files');
    await upload(page, [TO_GRADE]);
    assert.equal(await page.locator('tr[data-file="conversations.jsonl"] select').inputValue(), 'rubric_responses');
    await page.check('input[name=model][value=local]');
    await page.setInputFiles('#model-folder', dir);
    await page.selectOption('#opt-backend', 'cpu');
    await run(page, '#run-grade');
    const { result } = await page.evaluate(() => window.medrank.state.lastResult);
    // The page's grader said met where the CLI's did (P(met) agree to ~1e-7; none sits at 0.5).
    const cliMet = readFileSync(graded, 'utf8')
      .trim()
      .split('\n')
      .flatMap((l) => JSON.parse(l).criteria.map((c) => c.met));
    assert.deepEqual(
      result.report.criteria.map((c) => c.met),
      cliMet,
    );
    // The agreement: the CLI's report but for the graded file's name and bytes (its P(met)
    // digits are the page's), every figure within 1e-12; the tables' CSVs as --csv writes them.
    const agreement = result.grader_agreement;
    assert.ok(agreement, 'Grade sets the grader against the people');
    const comparable = (r) => {
      const c = baseNames(r);
      c.provenance.inputs = c.provenance.inputs.slice(0, 1);
      return c;
    };
    assert.equal(agreement.report.provenance.inputs[1].name, 'conversations.graded.jsonl');
    assert.deepEqual(differences(comparable(agreement.report), comparable(expected)), []);
    for (const t of agreement.tables)
      assert.equal(t.csv, readFileSync(join(work, 'csv', `${t.name}.csv`), 'utf8'), `${t.name}.csv`);
    await openTab(page, 'Agreement');
    assertFigures(agreement, await drawnFigures(page), expected, true, { someUndefined: false });
    await screenshot(page, '15-grade-agreement');
    // Grade's own report and tables stay `medrank grade`'s; the agreement's tables follow them
    // under Tables & export.
    assert.deepEqual(result.tables.map((t) => t.name).slice(0, 3), [
      'grade_criteria',
      'rubric_responses',
      'rubric_systems',
    ]);
    await openTab(page, 'Tables & export');
    assert.equal(await page.locator('[data-table=rubric_agreement]').count(), 1);
  },
);
