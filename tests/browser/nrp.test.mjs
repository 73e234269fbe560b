// NRP in a real browser on the example files: the report equals `medrank nrp`'s on the same
// files, the view shows its means, moving a dimension weight re-runs it with that weight, and
// a fusion ranker added in the view gives every ranker's expert agreement as the CLI does.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { openApp, run, setOptions, screenshot, waitForChecks, cli, differences, EXAMPLES } from './harness.mjs';

const NRP = join(EXAMPLES, 'nrp');
const ANSWERS = ['gpt-3.5-turbo__multimedqa.csv', 'gpt-3.5-turbo__no_prompt.csv', 'llama-2-13b__multimedqa.csv', 'llama-2-13b__no_prompt.csv'];
// Upload order = the order the CLI is given them (the provenance lists inputs in order).
const FILES = ['topics.xml', 'qrels.relevance.txt', 'qrels.credibility.txt', 'qrels.readability.txt', ...ANSWERS.map((a) => `answers/${a}`), 'docs.tsv', 'run.bm25.txt', 'answer_scores.csv', 'expert_rankings.csv'];
const CLI_ARGS = ['nrp', '--topics', 'topics.xml', '--qrels', 'relevance=qrels.relevance.txt', '--qrels', 'credibility=qrels.credibility.txt',
  '--qrels', 'readability=qrels.readability.txt', '--not-judgeable', 'credibility=3', ...ANSWERS.flatMap((a) => ['--answers', a]),
  '--docs', 'docs.tsv', '--ranker', 'run.bm25=run.bm25.txt,answer_scores.csv', '--expert-rankings', 'expert_rankings.csv',
  '--seed', '0', '--quiet'];
let app, dir, cliReport, pageReport;

before(async () => {
  // Flat copies, so the CLI names every input exactly as the browser does.
  dir = mkdtempSync(join(tmpdir(), 'medrank-nrp-'));
  for (const f of FILES) copyFileSync(join(NRP, f), join(dir, basename(f)));
  cli([...CLI_ARGS, '--json', 'nrp.json'], dir);
  cliReport = JSON.parse(readFileSync(join(dir, 'nrp.json'), 'utf8'));

  app = await openApp();
  await app.page.setInputFiles('#file-input', FILES.map((f) => join(dir, basename(f))));
  await waitForChecks(app.page, FILES.length);
  await setOptions(app.page, { not_judgeable: 'credibility=3' });
  await run(app.page, '#run-nrp');
  pageReport = await app.page.evaluate(() => window.medrank.state.lastResult.result.report);
});
after(async () => {
  await app?.close();
});

test('NRP computed in the browser equals medrank nrp --json', () => {
  const sorted = (r) => {
    const c = structuredClone(r);
    c.provenance.inputs.sort((a, b) => a.name.localeCompare(b.name));
    return c;
  };
  assert.deepEqual(differences(sorted(pageReport), sorted(cliReport)), []);
  assert.equal(cliReport.groups.length, 4);
});

test('the NRP view shows each model and prompt’s mean NRP', async () => {
  const { page } = app;
  for (const g of cliReport.groups) {
    const cell = page.locator(`table.nrp-table tr[data-system="${g.system}"][data-prompt="${g.prompt}"] td[data-col=mean]`);
    assert.equal(await cell.textContent(), g.mean.toFixed(3));
  }
  assert.equal(await page.locator('svg.nrp rect[rx="2"]').count(), 4 + 2, 'four bars and two legend swatches');
  await screenshot(page, '10-nrp');
});

test('a dimension weight slider re-runs NRP with that weight', async () => {
  const { page } = app;
  const slider = page.locator('input[data-dimension=relevance]');
  await slider.fill('1');
  await slider.dispatchEvent('change');
  for (const dim of ['credibility', 'readability']) {
    const s = page.locator(`input[data-dimension=${dim}]`);
    await s.fill('0');
    await s.dispatchEvent('change');
  }
  await page.waitForFunction(() => {
    const dims = window.medrank.state.lastResult.result.report.dimensions;
    return dims.find((d) => d.dimension === 'relevance').weight === 1;
  }, null, { timeout: 30000 });
  const report = await page.evaluate(() => window.medrank.state.lastResult.result.report);
  // With all weight on relevance, the combined mean is the relevance mean.
  const relevance = report.dimensions.findIndex((d) => d.dimension === 'relevance');
  for (const g of report.groups) assert.ok(Math.abs(g.mean - g.per_dimension_mean[relevance]) < 1e-12, `${g.system}/${g.prompt}`);
  await screenshot(page, '11-nrp-weights');
});

test('a fusion ranker from the view: every ranker’s expert agreement and the pairwise probabilities equal the CLI’s', async () => {
  const { page } = app;
  cli([...CLI_ARGS, '--fuse', 'rrf:bm25,run.bm25', '--json', 'nrp_fused.json'], dir);
  const fused = JSON.parse(readFileSync(join(dir, 'nrp_fused.json'), 'utf8'));
  assert.deepEqual(fused.expert_agreement.map((a) => a.ranker), ['run.bm25', 'bm25', 'rrf(bm25+run.bm25)']);
  assert.equal(fused.agreement_comparisons.length, 3);

  await page.fill('#nrp-fuse', 'rrf:bm25,run.bm25');
  await run(page, '#nrp-fuse-run');
  const report = await page.evaluate(() => window.medrank.state.lastResult.result.report);
  assert.deepEqual(differences(report.expert_agreement, fused.expert_agreement), []);
  assert.deepEqual(differences(report.agreement_comparisons, fused.agreement_comparisons), []);
  assert.deepEqual(differences(report.dimensions.map((d) => d.validation), fused.dimensions.map((d) => d.validation)), []);

  // The view's table: each ranker's mean tau-b, and P(row better than column) both ways.
  for (const a of fused.expert_agreement) {
    const cell = page.locator(`table.nrp-agreement tr[data-ranker="${a.ranker}"] td[data-col=mean]`);
    assert.equal(await cell.textContent(), a.mean_tau.toFixed(3));
  }
  for (const c of fused.agreement_comparisons) {
    const cell = (row, col) => page.locator(`table.nrp-agreement tr[data-ranker="${row}"] td[data-other="${col}"]`).textContent();
    assert.equal(await cell(c.ranker, c.other), c.probability_better.toFixed(3));
    assert.equal(await cell(c.other, c.ranker), (1 - c.probability_better).toFixed(3));
  }
  assert.match(await page.locator('[data-stat=unscored]').textContent(), /ranked below every scored item/);
  await screenshot(page, '12-nrp-agreement');
});
