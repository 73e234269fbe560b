// The full ranking-over-scoring path in a real browser: upload a bundle, predictions, human
// rankings and a corpus; run; check that the page's report, its rendered numbers and its
// CSV export equal what `medrank evaluate` writes for the same files.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, upload, waitForChecks, run, openTab, setOptions, screenshot, cli, differences, EXAMPLES } from './harness.mjs';

const FILES = ['bundle.jsonl', 'predictions.csv', 'rankings.csv', 'corpus.jsonl'];
let app, pageResult, cliReport, csvDir;
const fmt3 = (x) => x.toFixed(3);

before(async () => {
  // The CLI on the same files, named as the browser names them (so fingerprints agree).
  const out = mkdtempSync(join(tmpdir(), 'medrank-cli-'));
  csvDir = join(out, 'csv');
  cli(['evaluate', '--bundle', join(EXAMPLES, 'bundle.jsonl'), '--predictions', join(EXAMPLES, 'predictions.csv'),
    '--rankings', join(EXAMPLES, 'rankings.csv'), '--corpus', join(EXAMPLES, 'corpus.jsonl'),
    '--seed', '0', '--json', join(out, 'report.json'), '--csv', csvDir, '--quiet']);
  cliReport = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));

  app = await openApp();
  await upload(app.page, FILES);
  await run(app.page, '#run-rank_systems');
  pageResult = await app.page.evaluate(() => window.medrank.state.lastResult.result);
});
after(async () => {
  await app?.close();
});

/** The CLI names inputs by the path it was given; the page by the file name. The order in
 *  which a front end lists its inputs is not part of the result. */
function withoutPaths(report) {
  const copy = structuredClone(report);
  const strip = (p) => {
    p.inputs.forEach((f) => { f.name = f.name.split('/').pop(); });
    p.inputs.sort((a, b) => a.name.localeCompare(b.name));
  };
  strip(copy.provenance);
  for (const e of copy.evaluators) strip(e.report.provenance);
  if (copy.controls_added) strip(copy.controls_added.provenance);
  return copy;
}

test('the report computed in the browser equals the CLI’s --json report', () => {
  assert.deepEqual(differences(withoutPaths(pageResult.report), withoutPaths(cliReport)), []);
  assert.ok(cliReport.evaluators[0].report.tasks.length >= 1);
});

test('the rendered ranking shows the report’s scores, intervals and ranks', async () => {
  const { page } = app;
  await openTab(page, 'Ranking');
  for (const task of cliReport.evaluators[0].report.tasks) {
    const table = page.locator(`table.ranking[data-task="${task.task}"]`);
    for (const s of task.systems) {
      const row = table.locator(`tr[data-system="${s.system}"]`);
      const cells = await row.locator('td').allTextContents();
      assert.equal(cells[0], Number.isInteger(s.rank) ? String(s.rank) : s.rank.toFixed(1), `${task.task}/${s.system} rank`);
      assert.equal(cells[2], fmt3(s.score), `${task.task}/${s.system} score`);
      assert.equal(cells[3], `${fmt3(s.interval.lo)} – ${fmt3(s.interval.hi)}`, `${task.task}/${s.system} interval`);
    }
  }
  await screenshot(page, '03-ranking');
});

test('the human-agreement panel shows the report’s Kendall tau, Friedman p and alpha', async () => {
  const { page } = app;
  await openTab(page, 'Human agreement');
  const tasks = cliReport.evaluators[0].report.tasks.filter((t) => t.human);
  assert.ok(tasks.length > 0, 'the example has human rankings');
  const cards = await page.locator('[data-stat=kendall] .value').allTextContents();
  const alphas = await page.locator('[data-stat=alpha] .value').allTextContents();
  const friedman = await page.locator('[data-stat=friedman] .value').allTextContents();
  tasks.forEach((t, i) => {
    assert.equal(cards[i], fmt3(t.human.kendall_tau_b.tau));
    assert.equal(alphas[i], fmt3(t.human.krippendorff_alpha_ordinal));
    const p = t.human.friedman.p_value;
    assert.equal(friedman[i], `p = ${p !== 0 && p < 1e-4 ? p.toExponential(1) : p.toFixed(4)}`);
  });
  await screenshot(page, '04-agreement');
});

test('the heatmap, robustness verdict and drill-down render', async () => {
  const { page } = app;
  await openTab(page, 'Heatmap');
  const cells = await page.locator('svg.heatmap rect[rx="4"]').count();
  const rows = cliReport.evaluators.reduce((n, e) => n + e.report.tasks.length, 0);
  const systems = new Set(cliReport.evaluators.flatMap((e) => e.report.tasks.flatMap((t) => t.systems.map((s) => s.system))));
  assert.equal(cells, rows * systems.size);
  await screenshot(page, '05-heatmap');
  await openTab(page, 'Robustness');
  const verdicts = await page.locator('.verdict').count();
  assert.equal(verdicts, rows);
  await screenshot(page, '06-robustness');
  await openTab(page, 'Per instance');
  await page.locator('.drill-list button').nth(1).click();
  assert.match(await page.locator('.drill-detail h3').textContent(), /^Instance /);
  await screenshot(page, '07-drilldown');
});

test('every table exports as CSV identical to the CLI’s --csv files', async () => {
  const { page } = app;
  await openTab(page, 'Tables & export');
  const names = pageResult.tables.map((t) => t.name);
  assert.ok(names.length > 0);
  // Input names are paths on the CLI and file names in the browser.
  const norm = (s) => s.split(EXAMPLES + '/').join('');
  const expected = (name) => norm(readFileSync(join(csvDir, `${name}.csv`), 'utf8'));
  // What each export button saves is the table's `csv` text from the engine...
  for (const t of pageResult.tables) assert.equal(norm(t.csv), expected(t.name), `${t.name}.csv`);
  // ...and the buttons do save it (a few: Chromium throttles bursts of downloads).
  for (const name of names.slice(0, 3)) {
    const download = page.waitForEvent('download');
    await page.click(`[data-export="${name}.csv"]`);
    const saved = await download;
    assert.equal(saved.suggestedFilename(), `${name}.csv`);
    assert.equal(norm(readFileSync(await saved.path(), 'utf8')), expected(name), `${name}.csv`);
  }
  const json = page.waitForEvent('download');
  await page.click(`[data-export="${names[0]}.json"]`);
  const rows = JSON.parse(readFileSync(await (await json).path(), 'utf8'));
  assert.equal(rows.length, pageResult.tables[0].rows.length);
  assert.deepEqual(Object.keys(rows[0]), pageResult.tables[0].headers);
  await screenshot(page, '08-tables');
});

test('result tabs work from the keyboard (arrow keys move between views)', async () => {
  const { page } = app;
  await openTab(page, 'Ranking');
  await page.focus('#tabs [role=tab][aria-selected=true]');
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.textContent('#tabs [role=tab][aria-selected=true]'), 'Heatmap');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Heatmap');
  assert.equal(await page.isVisible('svg.heatmap'), true);
  await page.keyboard.press('End');
  assert.equal(await page.textContent('#tabs [role=tab][aria-selected=true]'), 'Provenance');
});

test('the printable report is self-contained', async () => {
  const { page } = app;
  const download = page.waitForEvent('download');
  await page.click('#download-report');
  const html = readFileSync(await (await download).path(), 'utf8');
  assert.match(html, /<h1>medrank report: ranking over scoring<\/h1>/);
  assert.doesNotMatch(html, /<script|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
});

test('a score below the task’s chance level is flagged beside the ranking (issue 47)', async () => {
  const { page } = app;
  await openTab(page, 'Ranking');
  const mcqa = cliReport.evaluators[0].report.tasks.find((t) => t.task === 'mcqa');
  // Chance for MCQA: a uniform guess among each question's options, 1 / options averaged.
  const bundle = readFileSync(join(EXAMPLES, 'bundle.jsonl'), 'utf8').trim().split('\n').map(JSON.parse);
  const scored = bundle.filter((i) => i.task === 'mcqa');
  const chance = scored.reduce((sum, i) => sum + 1 / Object.keys(i.options).length, 0) / scored.length;
  assert.ok(Math.abs(mcqa.chance - chance) < 1e-12, `${mcqa.chance} vs ${chance}`);
  const below = mcqa.systems.filter((s) => s.score < chance).map((s) => s.system);
  assert.equal(
    await page.textContent('p.chance[data-task="mcqa"]'),
    `Chance: ${fmt3(chance)} (a uniform guess among each question’s options). ` +
      (below.length
        ? `Below chance: ${below.join(', ')} (the evaluator does worse than a guess with those arguments).`
        : 'No system scores below it.'),
  );
  for (const s of mcqa.systems) {
    const cell = await page.textContent(`table.ranking[data-task="mcqa"] tr[data-system="${s.system}"] td:nth-child(2)`);
    assert.equal(cell.endsWith(' (below chance)'), below.includes(s.system), `${s.system}: ${cell}`);
  }
  // Misinformation has no plain chance level (macro-F1): nothing is said there.
  assert.equal(await page.locator('p.chance[data-task="misinformation"]').count(), 0);
});

test('items the ranking leaves out are counted before the run, in Warnings and in the report, and the page keeps them on request', async () => {
  const { page } = app;
  const nee = readFileSync(join(EXAMPLES, 'bundle.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map(JSON.parse)
    .filter((i) => i.label === 'not_enough_evidence')
    .map((i) => i.id);
  assert.equal(nee.length, 1);
  const warning =
    `misinformation: 1 instance labelled not_enough_evidence is left out of the ranking, as the Ranking-Over-Scoring paper leaves them out (\`--keep-not-enough-evidence\`, on the page Options → "keep not_enough_evidence", keeps them): ${nee[0]}`;
  // The report and Warnings (the CLI's report says the same).
  const misinformation = (r) => r.evaluators[0].report.tasks.find((t) => t.task === 'misinformation');
  assert.equal(misinformation(pageResult.report).dropped_not_enough_evidence, 1);
  assert.ok(pageResult.report.warnings.some((w) => w.message === warning), JSON.stringify(pageResult.report.warnings));
  assert.ok(cliReport.warnings.some((w) => w.message === warning));
  await page.click('#tabs [role=tab]:has-text("Warnings (")');
  assert.ok((await page.textContent('[data-view="warnings"]')).includes(warning));
  // The check before a model run counts them.
  await page.check('input[name=model][value=bundled]');
  await page.waitForFunction(() => /Ready: .*instances ×/.test(document.querySelector('#rank-check').textContent));
  assert.match(
    await page.textContent('#rank-check'),
    /; of them 1 labelled not_enough_evidence is left out of the ranking \(Options → “keep not_enough_evidence” keeps them\)/,
  );
  // The page's own control for --keep-not-enough-evidence: checked, nothing is left out.
  await page.evaluate(() => {
    document.querySelector('details.options').open = true;
  });
  await page.check('#opt-keep-not-enough-evidence');
  await page.waitForFunction(() => !/not_enough_evidence/.test(document.querySelector('#rank-check').textContent));
  await page.check('input[name=model][value=predictions]');
  await run(page, '#run-rank_systems');
  const kept = await page.evaluate(() => window.medrank.state.lastResult.result.report);
  assert.equal(misinformation(kept).dropped_not_enough_evidence, 0);
  assert.equal(misinformation(kept).n_instances, misinformation(pageResult.report).n_instances + 1);
  assert.ok(!kept.warnings.some((w) => w.message.includes('not_enough_evidence')));
});

/** The Ranking tab's line on an evaluator's agreement with people's rankings of one task,
 *  written from the CLI report's numbers (its Kendall tau-b, p-value and systems). */
function peopleLineOf(human) {
  const k = human.kendall_tau_b;
  const p = k.p_value !== 0 && k.p_value < 1e-4 ? k.p_value.toExponential(1) : k.p_value.toFixed(4);
  return `Agreement with people’s rankings: Kendall's τ-b ${fmt3(k.tau)} between its scores and the people's mean ranks (0 = chance, 1 = the same order; p = ${p}) over ${k.n} systems.`;
}

test('beside each ranking, its agreement with the people’s rankings, marked in the tab and in Warnings at or below chance (issue 47, item 1)', async () => {
  const { page } = app;
  // The example's people agree with the evaluator (tau 0.548 and 0.707): said, not marked.
  // (The options as the CLI's above: the test before kept not_enough_evidence.)
  await setOptions(page, { keep_not_enough_evidence: false });
  await page.check('input[name=model][value=predictions]');
  await page.evaluate(() => {
    window.medrank.state.files = [];
  });
  await upload(page, FILES);
  await run(page, '#run-rank_systems');
  await openTab(page, 'Ranking');
  const lines = async () =>
    page.$$eval('[data-view="ranking"] p.people-agreement', (ps) =>
      ps.map((p) => ({ task: p.dataset.task, text: p.textContent, trusted: p.dataset.trusted })),
    );
  const tasks = cliReport.evaluators[0].report.tasks;
  assert.deepEqual(
    await lines(),
    tasks.map((t) => ({ task: t.task, text: peopleLineOf(t.human), trusted: 'true' })),
  );
  assert.ok(tasks.every((t) => t.human.kendall_tau_b.tau > 0.5));

  // People who rank the systems the other way round (rank 5 - r of four): the evaluator
  // orders them no better than chance. The CLI says so in its warnings; the page beside
  // each ranking and in Warnings, in the same words.
  const dir = mkdtempSync(join(tmpdir(), 'medrank-reversed-'));
  const [head, ...rows] = readFileSync(join(EXAMPLES, 'rankings.csv'), 'utf8').trim().split('\n');
  const reversed = rows.map((r) => {
    const cells = r.split(',');
    cells[3] = String(5 - Number(cells[3]));
    return cells.join(',');
  });
  writeFileSync(join(dir, 'rankings.csv'), [head, ...reversed].join('\n') + '\n');
  const json = join(dir, 'report.json');
  cli(['evaluate', '--bundle', join(EXAMPLES, 'bundle.jsonl'), '--predictions', join(EXAMPLES, 'predictions.csv'),
    '--rankings', join(dir, 'rankings.csv'), '--corpus', join(EXAMPLES, 'corpus.jsonl'), '--seed', '0', '--json', json, '--quiet']);
  const expected = JSON.parse(readFileSync(json, 'utf8'));
  const expectedTasks = expected.evaluators[0].report.tasks;
  assert.ok(expectedTasks.every((t) => t.human.kendall_tau_b.tau < 0), 'reversed, every task disagrees');
  const why = (t) => `its Kendall's τ-b ${fmt3(t.human.kendall_tau_b.tau)} is no better than chance (0): it orders the systems no more like the people than a random order would`;
  const said = expected.warnings.map((w) => w.message).filter((m) => m.includes('not to be trusted'));
  assert.deepEqual(
    said,
    expectedTasks.map((t) => `evaluator \`predictions\`'s ranking of ${t.task} is not to be trusted: ${why(t)} (${peopleLineOf(t.human).replace(/^Agreement with people’s rankings: /, '').replace(/\.$/, '')})`),
  );
  await page.evaluate(() => {
    window.medrank.state.files = [];
  });
  await page.setInputFiles('#file-input', [...FILES.filter((f) => f !== 'rankings.csv').map((f) => join(EXAMPLES, f)), join(dir, 'rankings.csv')]);
  await waitForChecks(page, FILES.length);
  await run(page, '#run-rank_systems');
  await openTab(page, 'Ranking');
  assert.deepEqual(
    await lines(),
    expectedTasks.map((t) => ({ task: t.task, text: `${peopleLineOf(t.human)} Not to be trusted: ${why(t)}.`, trusted: 'false' })),
  );
  assert.equal(await page.locator('[data-view="ranking"] p.people-agreement.issue.bad').count(), expectedTasks.length);
  await page.click('#tabs [role=tab]:has-text("Warnings (")');
  const warnings = await page.textContent('[data-view="warnings"]');
  for (const w of said) assert.ok(warnings.includes(w), `${w} in ${warnings}`);
});

test('no Run button can be clicked while a dropped file is still being read or checked, so a run never starts on part of the files', async () => {
  const { page } = app;
  // Empty the list as a user does (each file's ✕), then the bundle and predictions: the
  // ranking can run.
  while ((await page.locator('#files button[aria-label^="Remove "]').count()) > 0)
    await page.locator('#files button[aria-label^="Remove "]').first().click();
  await upload(page, ['bundle.jsonl', 'predictions.csv']);
  await page.waitForFunction(() => !document.querySelector('#run-rank_systems').disabled);
  // Every change of the page from here is looked at: a row that says "checking…" while a
  // Run button is enabled is a moment where a click would run without that file. (Before
  // the fix, the people's rankings, still being checked, were not yet a kind the ranking
  // reads, and the Rank button was enabled: a click ran a ranking without them.)
  await page.evaluate(() => {
    window.__seen = { first: null, checking: 0, enabledWhileChecking: [] };
    window.__observer = new MutationObserver(() => {
      const rank = document.querySelector('#run-rank_systems');
      // The page's first change after the drop, before its files are read and listed.
      window.__seen.first ??= { listed: document.querySelectorAll('#files tbody tr').length, disabled: rank.disabled, title: rank.title };
      const checking = [...document.querySelectorAll('#files tr')]
        .filter((tr) => tr.querySelector('td.check')?.textContent.includes('checking'))
        .map((tr) => tr.dataset.file);
      if (!checking.length) return;
      window.__seen.checking++;
      for (const b of document.querySelectorAll('[data-job]'))
        if (!b.disabled) window.__seen.enabledWhileChecking.push(`${b.id} with ${checking.join(', ')} checking`);
    });
    window.__observer.observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
  });
  await page.setInputFiles('#file-input', [join(EXAMPLES, 'rankings.csv'), join(EXAMPLES, 'corpus.jsonl')]);
  await waitForChecks(page, FILES.length);
  await page.waitForFunction(() => !document.querySelector('#run-rank_systems').disabled);
  const seen = await page.evaluate(() => {
    window.__observer.disconnect();
    return window.__seen;
  });
  // While the drop's files were read, before they were listed, the buttons waited already
  // and said why.
  assert.deepEqual(seen.first, { listed: 2, disabled: true, title: 'Wait: the files are still being read and checked.' });
  assert.ok(seen.checking > 0, 'the rows were seen while they were checked');
  assert.deepEqual(seen.enabledWhileChecking, []);
  // The run that follows reads all four files: the people's rankings among them.
  await setOptions(page, { keep_not_enough_evidence: false });
  await run(page, '#run-rank_systems');
  const report = await page.evaluate(() => window.medrank.state.lastResult.result.report);
  assert.deepEqual(
    report.evaluators[0].report.tasks.map((t) => t.human.kendall_tau_b.tau),
    cliReport.evaluators[0].report.tasks.map((t) => t.human.kendall_tau_b.tau),
  );
});

test('a dropped file that cannot be read is listed with why, and the other files of the drop are checked and used', async () => {
  const { page } = app;
  while ((await page.locator('#files button[aria-label^="Remove "]').count()) > 0)
    await page.locator('#files button[aria-label^="Remove "]').first().click();
  await upload(page, ['bundle.jsonl', 'corpus.jsonl']); // the corpus: the options in force use a control that reads it
  // One drop: a file whose read fails (as when it is moved away between the drop and its
  // read; an object stands in for that File, since a real one cannot be made unreadable
  // from here), then the predictions, read and checked after it.
  await page.evaluate((predictions) => {
    const input = document.querySelector('#file-input');
    const unreadable = { name: 'moved.csv', size: 4, text: () => Promise.reject(new Error('NotReadableError: moved away')) };
    Object.defineProperty(input, 'files', { value: [unreadable, new File([predictions], 'predictions.csv')], configurable: true });
    input.dispatchEvent(new Event('change'));
    delete input.files;
  }, readFileSync(join(EXAMPLES, 'predictions.csv'), 'utf8'));
  await waitForChecks(page, 4);
  const files = await page.evaluate(() => window.medrank.state.files.map((f) => [f.name, f.check.status, f.size]));
  assert.deepEqual(files, [
    ['bundle.jsonl', 'ok', readFileSync(join(EXAMPLES, 'bundle.jsonl')).length],
    ['corpus.jsonl', 'ok', readFileSync(join(EXAMPLES, 'corpus.jsonl')).length],
    ['moved.csv', 'bad', 4],
    ['predictions.csv', 'ok', readFileSync(join(EXAMPLES, 'predictions.csv')).length],
  ]);
  assert.match(await page.textContent('#files tr[data-file="moved.csv"]'), /The file could not be read: NotReadableError: moved away/);
  // The ranking runs on the files that were read.
  await page.waitForFunction(() => !document.querySelector('#run-rank_systems').disabled, null, { timeout: 10000 });
  await run(page, '#run-rank_systems');
  assert.ok(await page.evaluate(() => window.medrank.state.lastResult.result.report.evaluators.length > 0));
});
