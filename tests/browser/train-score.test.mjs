// Training the score task (a metric learned from human scores, issue 43) in the page: on a
// slice of the vendored SQuALITY scores, the page's dev Spearman and kappa per epoch are
// `medrank train --task score`'s with the same options and seed (within 1e-4, as the other
// page-vs-CLI trainings: the frozen features come from the wasm CPU path here, from the
// native one there), and its .zip, unzipped, is a folder `medrank metrics --learned` reads
// and scores a SQuALITY file with as it does with the CLI's folder.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, cli, cliTrain, pageTrain, firstLines as writeFirstLines, haveDefaultModel as haveModel, ROOT } from './harness.mjs';

const work = mkdtempSync(join(tmpdir(), 'medrank-train-score-'));

/** The first `n` lines of a SQuALITY scores file, written to the work folder. */
const firstLines = (file, n, name) => writeFirstLines(join(ROOT, 'data/squality-scores', file), n, join(work, name));

// Small, for a short test: two batches of 15 stories' summaries to train on, one batch to
// pick the epoch, one to score; the head alone, two epochs.
// As `cliTrain` and `pageTrain` take a case: the same options for the CLI and the form.
const CASE = {
  file: firstLines('train.jsonl', 30, 'train-30.jsonl'),
  dev: firstLines('dev.jsonl', 15, 'dev-15.jsonl'),
  task: 'score',
  arguments: 'none',
  freeze: 'head',
  // What the score model reads (`--score-input`; the form shows the choice for task score).
  scoreInput: 'candidate',
  settings: { epochs: 2, lr: 0.001, batch: 8, patience: 2, seed: 7, split: 0.2 },
};
const SCORED = firstLines('test.jsonl', 15, 'test-15.jsonl');

let app;
before(async () => {
  if (haveModel) app = await openApp();
});
after(async () => {
  await app?.close();
  rmSync(work, { recursive: true, force: true });
});

/** `medrank metrics --learned FOLDER` on the scored slice: its JSON report. */
function learnedMetrics(folder, name) {
  const report = join(work, name);
  cli(['metrics', '--input', SCORED, '--learned', folder, '--resamples', '50', '--json', report, '--quiet']);
  return JSON.parse(readFileSync(report, 'utf8'));
}

const close = (a, b, tol = 1e-4) => (a == null && b == null) || Math.abs(a - b) <= tol;

test(
  'the page trains the score task to the CLI’s dev Spearman and kappa, and its .zip scores as the CLI’s folder in `metrics --learned`',
  { skip: !haveModel && 'no default model: run scripts/setup.sh model, then scripts/build-web.sh' },
  async () => {
    const { page } = app;
    const cliFolder = join(work, 'cli-score');
    const cliLog = cliTrain(CASE, cliFolder);
    // The form offers the task for a metrics file, with its human score dimensions.
    const trained = await pageTrain(page, CASE, 'page-score');
    const info = await page.textContent('#train-file-info');
    assert.match(info, /^30 scored candidates, metrics JSONL file .*correctness, selection, overall/);
    const { report, stored } = trained;
    assert.equal(report.select_by, 'spearman');
    assert.equal(report.curve.length, cliLog.curve.length, JSON.stringify(report.curve));
    report.curve.forEach((e, i) => {
      const want = cliLog.curve[i];
      const at = `epoch ${i + 1}`;
      assert.ok(close(e.train_loss, want.train_loss), `${at} loss ${e.train_loss} vs ${want.train_loss}`);
      assert.ok(close(e.dev_loss, want.dev_loss), `${at} dev loss ${e.dev_loss} vs ${want.dev_loss}`);
      assert.ok(close(e.dev_metric, want.dev_metric), `${at} dev metric ${e.dev_metric} vs ${want.dev_metric}`);
      const [got, exp] = [e.dev_scores, want.dev_scores];
      // One dev batch of 15: Spearman is defined (kappa is not where raters' means are not
      // whole numbers: null on both sides then).
      assert.equal(typeof got.spearman, 'number', JSON.stringify(got));
      assert.ok(close(got.spearman, exp.spearman), `${at} Spearman ${got.spearman} vs ${exp.spearman}`);
      assert.ok(close(got.kappa, exp.kappa), `${at} kappa ${got.kappa} vs ${exp.kappa}`);
      assert.deepEqual(
        got.dimensions.map((d) => d.dimension),
        exp.dimensions.map((d) => d.dimension),
      );
      assert.equal(e.steps, want.steps);
    });
    assert.equal(report.best_epoch, cliLog.best_epoch);
    // The page says each epoch's Spearman with kappa beside it, and the epoch picked.
    const lines = await page.$$eval('#train-score-epochs li', (li) => li.map((l) => l.textContent));
    assert.equal(lines.length, report.curve.length);
    const best = report.curve[report.best_epoch - 1].dev_scores;
    assert.ok(lines[report.best_epoch - 1].endsWith('(picked)'), lines.join(' | '));
    assert.match(lines[0], /^Epoch 1: dev Spearman (-?\d\.\d{4}|undefined), dev kappa (-?\d\.\d{4}|undefined)/);
    assert.match(
      await page.textContent('#train-result'),
      new RegExp(`dev Spearman ${report.best_dev_metric.toFixed(4)}`),
    );
    assert.ok(close(report.best_dev_metric, best.spearman, 0));
    // The kept list names the task and what trained.
    const entry = await page.textContent(`#trained-list li[data-id="${stored.id}"]`);
    assert.match(entry, /page-score — score, trained head, best epoch \d by dev Spearman/);

    // The download: the model folder; `metrics --learned` gives the CLI folder's numbers.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click(`button[data-download="${stored.id}"]`),
    ]);
    const zip = join(work, 'score.zip');
    await download.saveAs(zip);
    const unzipped = join(work, 'unzipped');
    execFileSync('python3', ['-m', 'zipfile', '-e', zip, unzipped]);
    const folder = join(unzipped, 'page-score');
    assert.deepEqual(readdirSync(folder).sort(), [
      'config.json',
      'model.safetensors',
      'tokenizer.json',
      'train_log.json',
    ]);
    const config = JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8'));
    assert.equal(config.problem_type, 'regression');
    assert.equal(config.medrank_score_input, 'candidate', 'the answer alone, as chosen in the form');
    assert.equal(config.medrank_head_pooling, 'mean', "the score task's default head, on the mean of the tokens");
    assert.equal(JSON.parse(readFileSync(join(folder, 'train_log.json'), 'utf8')).task, 'score');
    const fromPage = learnedMetrics(folder, 'page-metrics.json');
    const fromCli = learnedMetrics(cliFolder, 'cli-metrics.json');
    const learned = (r) => r.extra_scores.filter((e) => e.name.startsWith('learned:'));
    assert.deepEqual(
      learned(fromPage).map((e) => e.name),
      ['learned:correctness', 'learned:selection', 'learned:overall'],
    );
    assert.deepEqual(
      learned(fromPage).map((e) => e.name),
      learned(fromCli).map((e) => e.name),
    );
    learned(fromPage).forEach((e, k) => {
      const want = learned(fromCli)[k];
      assert.equal(e.values.length, 15);
      e.values.forEach((v, i) => assert.ok(close(v, want.values[i]), `${e.name} row ${i}: ${v} vs ${want.values[i]}`));
    });
    // And their agreement with the experts, batch mean by batch mean.
    const means = (r) => r.agreement_means.filter((m) => m.metric.startsWith('learned:'));
    assert.equal(means(fromPage).length, 3);
    means(fromPage).forEach((m, k) => {
      const want = means(fromCli)[k];
      assert.equal(m.metric, want.metric);
      // A number, or on both sides the reason it is undefined.
      const [a, b] = [m.spearman.mean, want.spearman.mean];
      if (typeof a === 'number') assert.ok(close(a, b), `${m.metric} Spearman ${a} vs ${b}`);
      else assert.deepEqual(a, b);
    });
  },
);
