// Head training, page against CLI, wall time (a benchmark: figures, nothing asserted about
// speed): `medrank train --freeze head` (MEDRANK_BIN, a release build) and the page's
// "Train an evaluator" (medrank serve: cross-origin isolated, the threaded build on every
// core, the wasm CPU) on the same HiTZ training and dev files with the same options. Writes
// one JSON file: each side's wall time, the page's frozen-feature time, and both curves.
//
//   MEDRANK_BIN=target/release/medrank node bench-train.mjs OUT.json TRAIN.jsonl DEV.jsonl [EPOCHS]
import { writeFileSync, readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { openApp, cli, ROOT } from './harness.mjs';

const [out, train, dev, epochs = '20'] = process.argv.slice(2);
if (!out || !train || !dev) {
  console.error('usage: node bench-train.mjs OUT.json TRAIN.jsonl DEV.jsonl [EPOCHS]');
  process.exit(2);
}
const [trainPath, devPath] = [resolve(train), resolve(dev)];
const result = { date: new Date().toISOString(), cpus: cpus().length, cpu: cpus()[0]?.model, epochs: Number(epochs) };

// The CLI.
const dir = mkdtempSync(join(tmpdir(), 'medrank-bench-train-'));
result.load_before_cli = loadavg();
let t0 = performance.now();
cli(['train', '--model', join(ROOT, 'models/all-MiniLM-L6-v2'), '--train', trainPath, '--dev', devPath, '--freeze', 'head', '--epochs', epochs, '--out', join(dir, 'cli')]);
result.cli_seconds = (performance.now() - t0) / 1000;
const cliLog = JSON.parse(readFileSync(join(dir, 'cli', 'train_log.json'), 'utf8'));
result.cli = { cache_seconds: cliLog.cache_seconds, threads: cliLog.threads, best_epoch: cliLog.best_epoch, best_dev_accuracy: cliLog.best_dev_accuracy, curve: cliLog.curve };
console.error(`[bench-train] CLI ${result.cli_seconds.toFixed(1)} s`);

// The page, driven as a user would.
result.load_before_page = loadavg();
const app = await openApp();
try {
  const { page } = app;
  result.engine = await page.textContent('#engine');
  await page.selectOption('#opt-backend', 'cpu');
  await page.setInputFiles('#train-file', trainPath);
  await page.waitForFunction(() => /instances/.test(document.querySelector('#train-file-info').textContent), null, { timeout: 60000 });
  await page.setInputFiles('#train-dev-file', devPath);
  await page.fill('#train-epochs', epochs);
  t0 = performance.now();
  await page.click('#train-run');
  await page.waitForFunction(() => window.medrank.state.lastTraining || !document.querySelector('#train-error').hidden, null, { timeout: 6 * 3600 * 1000 });
  result.page_seconds = (performance.now() - t0) / 1000;
  const error = await page.$eval('#train-error', (e) => (e.hidden ? null : e.textContent));
  if (error) throw new Error(`the page reported: ${error}`);
  const t = await page.evaluate(() => window.medrank.state.lastTraining);
  result.page = { features_seconds: t.featuresMs / 1000, worker_seconds: t.elapsedMs / 1000, best_epoch: t.report.best_epoch, best_dev_accuracy: t.report.best_dev_accuracy, curve: t.report.curve };
  console.error(`[bench-train] page ${result.page_seconds.toFixed(1)} s (${result.engine})`);
} finally {
  await app.close();
}
result.page_over_cli = result.page_seconds / result.cli_seconds;
writeFileSync(out, JSON.stringify(result, null, 2));
