// Reference-based metrics and rubric grading in the browser equal `medrank metrics` and
// `medrank rubric` on the same example files.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, upload, run, openTab, screenshot, cli, differences, setOptions, waitForChecks, EXAMPLES, ROOT } from './harness.mjs';

let app;
before(async () => {
  app = await openApp();
});
after(async () => {
  await app?.close();
});

const baseName = (r) => {
  const c = structuredClone(r);
  c.provenance.inputs.forEach((f) => { f.name = f.name.split('/').pop(); });
  return c;
};

for (const [job, button, file, subcommand] of [
  ['metrics', '#run-metrics', 'metrics/summaries.jsonl', 'metrics'],
  ['rubric', '#run-rubric', 'rubric/graded.jsonl', 'rubric'],
]) {
  test(`${job} in the browser equals medrank ${subcommand} --json and --csv`, async () => {
    const out = mkdtempSync(join(tmpdir(), `medrank-${job}-`));
    cli([subcommand, '--input', join(EXAMPLES, file), '--seed', '0', '--json', join(out, 'r.json'), '--csv', join(out, 'csv'), '--quiet']);
    const expected = JSON.parse(readFileSync(join(out, 'r.json'), 'utf8'));
    const { page } = app;
    await page.click('#clear-files');
    await upload(page, [file]);
    await run(page, button);
    const result = await page.evaluate(() => window.medrank.state.lastResult.result);
    assert.deepEqual(differences(baseName(result.report), baseName(expected)), []);
    const norm = (s) => s.split(EXAMPLES + '/').join('').split('metrics/').join('').split('rubric/').join('');
    for (const t of result.tables) {
      assert.equal(norm(t.csv), norm(readFileSync(join(out, 'csv', `${t.name}.csv`), 'utf8')), `${t.name}.csv`);
    }
    await openTab(page, 'Tables & export');
    await screenshot(page, `14-${job}`);
  });
}

// Combined scorers (issue 43): the public SQuALITY answers, scored on test.jsonl with weights
// fitted on dev.jsonl (the second file's kind chosen as a user does), equal
// `medrank metrics --combine --combine-fit`; the page shows each combination against the
// best token metric with the interval of the difference.
test('metrics with combined scorers and weights fitted on a dev file equal medrank metrics --combine --combine-fit', async () => {
  const dir = join(ROOT, 'data/squality-scores');
  const out = mkdtempSync(join(tmpdir(), 'medrank-combine-'));
  cli(['metrics', '--input', 'test.jsonl', '--combine', '--combine-fit', 'dev.jsonl', '--seed', '0', '--json', join(out, 'r.json'), '--quiet'], dir);
  const expected = JSON.parse(readFileSync(join(out, 'r.json'), 'utf8'));
  const { page } = app;
  await page.click('#clear-files');
  await page.setInputFiles('#file-input', [join(dir, 'test.jsonl'), join(dir, 'dev.jsonl')]);
  await waitForChecks(page, 2);
  await page.selectOption('select[aria-label="Kind of dev.jsonl"]', 'metrics_fit');
  await waitForChecks(page, 2);
  await setOptions(page, { combine: true });
  await run(page, '#run-metrics');
  const result = await page.evaluate(() => window.medrank.state.lastResult.result);
  assert.deepEqual(differences(result.report, expected), []);
  assert.deepEqual(result.report.combination.fitted.map((f) => f.dimension), ['correctness', 'selection', 'overall']);
  await openTab(page, 'Tables & export');
  const text = await page.textContent('#results');
  assert.match(text, /Each added score against the best token-based metric/);
  assert.match(text, /Combination weights fitted on dev\.jsonl/);
  assert.match(text, /fitted:overall/);
});
