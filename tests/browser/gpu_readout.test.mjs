// The GPU readouts in the page (issue 45): on WebGPU the pass ends on the device with the
// model's head (a grader's logits) and hands back only those, as it ends with the pooling
// for the similarity evaluator (encoder.test.mjs checks that one's rankings). Here a
// criterion grader's P(met) for every criterion of the example rubric, graded on Chromium's
// WebGPU adapter (SwiftShader), equals the wasm CPU path's (pooler, tanh and classifier on
// the host) within 1e-4: the tolerance of f32 sums in another order, as the native parity
// tests (tests/integration/gpu_encoder.rs) hold logits to 1e-3.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, upload, run, cli, cliHas, ROOT, EXAMPLES } from './harness.mjs';
import { writeRandomBert } from './random-model.mjs';

const TOKENIZER = join(ROOT, 'models/all-MiniLM-L6-v2/tokenizer.json');
const RUBRIC = 'rubric/conversations.jsonl';
const SKIP = (!existsSync(TOKENIZER) && 'no model in models/: run scripts/setup.sh model') ||
  (!cliHas('grade') && 'this medrank binary has no `grade`');

/** Grades the uploaded rubric with the picked model on `backend`; returns the reply. */
async function grade(page, backend) {
  await page.selectOption('#opt-backend', backend);
  await page.evaluate(() => { window.previousResult = window.medrank.state.lastResult; });
  await run(page, '#run-grade');
  return page.evaluate(() => window.medrank.state.lastResult.result);
}

test('a grader’s P(met) on WebGPU (SwiftShader) equals the wasm CPU’s within 1e-4', { skip: SKIP }, async (t) => {
  // A small random BERT (two layers of 64: SwiftShader emulates the GPU on the CPU) with a
  // criterion head the CLI trains on the example's physician labels.
  const work = mkdtempSync(join(tmpdir(), 'medrank-readout-'));
  const base = join(work, 'tiny-bert');
  writeRandomBert(base, TOKENIZER, { layers: 2, hidden: 64, heads: 2, seed: 7, scale: 0.2 });
  const grader = join(work, 'tiny-grader');
  cli(['train', '--model', base, '--train', join(EXAMPLES, RUBRIC), '--dev-split', '0.25', '--task', 'criterion', '--epochs', '2', '--out', grader]);

  const app = await openApp({ webgpu: true });
  try {
    const { page } = app;
    await upload(page, [RUBRIC]);
    await page.check('input[name=model][value=local]');
    await page.setInputFiles('#model-folder', grader);
    const cpu = await grade(page, 'cpu');
    const gpu = await grade(page, 'gpu');
    assert.equal(cpu.backend.backend, 'cpu');
    assert.equal(gpu.backend.backend, 'gpu', 'WebGPU ran');
    const p = cpu.report.criteria.map((c) => c.p_met);
    const q = gpu.report.criteria.map((c) => c.p_met);
    assert.equal(p.length, 46);
    assert.equal(q.length, p.length);
    // The grader's outputs spread: the comparison is not one of constants.
    assert.ok(Math.max(...p) - Math.min(...p) > 0.01, `P(met) spread ${Math.min(...p)} .. ${Math.max(...p)}`);
    const worst = Math.max(...p.map((x, i) => Math.abs(x - q[i])));
    t.diagnostic(`largest P(met) difference WebGPU vs wasm CPU: ${worst.toExponential(2)}`);
    assert.ok(worst <= 1e-4, `P(met) differs by ${worst}`);
    // The same verdicts wherever P(met) is not within the tolerance of the 0.5 cut.
    const clear = p.flatMap((x, i) => (Math.abs(x - 0.5) > 1e-4 ? [i] : []));
    assert.deepEqual(clear.map((i) => gpu.report.criteria[i].met), clear.map((i) => cpu.report.criteria[i].met));
  } finally {
    await app.close();
  }
});
