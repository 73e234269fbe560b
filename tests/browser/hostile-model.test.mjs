// A model that computes NaN (issue 39): finite weights of about 1e24 in its first layer's
// query and key pass every load check, and its attention scores overflow f32, so every output is
// NaN. The page's model jobs (Rank systems, Grade, Statements, Train) refuse it as the CLI
// does, naming the computation and the first input, instead of taking NaN for a verdict
// (NaN's argmax is class 0: every statement "contradicted"); and the page goes on working.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, upload, run, trainFilledForm, cli, cliHas, ROOT, EXAMPLES } from './harness.mjs';
import { writeRandomBert } from './random-model.mjs';

const MODEL = join(ROOT, 'models/all-MiniLM-L6-v2');
const SKIP =
  (!existsSync(join(MODEL, 'tokenizer.json')) && 'no default model: run scripts/setup.sh model') ||
  (!cliHas('statements') && 'this medrank binary has no `statements`');

/** The CLI's refusal of `args`: its stderr (it must fail). */
function cliRefusal(args) {
  try {
    cli(args);
  } catch (e) {
    return String(e.stderr);
  }
  throw new Error(`medrank ${args.join(' ')} succeeded on a model that computes NaN`);
}

test('a model that computes NaN is refused by every model job of the page, as by the CLI', { skip: SKIP }, async () => {
  const work = mkdtempSync(join(tmpdir(), 'medrank-nan-model-'));
  const dir = join(work, 'nan-nli');
  const files = writeRandomBert(dir, join(MODEL, 'tokenizer.json'), {
    layers: 1,
    hidden: 32,
    heads: 4,
    seed: 3,
    labels: ['contradiction', 'neutral', 'entailment'],
    scaled: { 'encoder.layer.0.attention.self.query.weight': 1e25, 'encoder.layer.0.attention.self.key.weight': 1e25 },
  });
  // The CLI's refusal of each job on the same folder and files: what was NaN and the kind of
  // input named (the CLI names a file by the path it was given, the page by its name). Which
  // input is the first to overflow may differ between the native and the wasm arithmetic
  // (seen: criteria[0] natively, criteria[1] in the page), so the position is left out.
  const nanFor = (message) => {
    const m = /computed NaN or infinite (.+?) for (.+?): numbers that are not numbers are no verdict/.exec(message);
    assert.ok(m, message);
    const input = m[2]
      .replace(/\S*\/(\w+\.jsonl)/, '$1')
      .replace(/:\d+: /, ':N: ')
      .replace(/`[^`]*`/g, '`X`')
      .replace(/\[\d+\]|\(line \d+\)/g, '#');
    return [m[1], input];
  };
  const cliRefusals = {
    '#run-rank_systems': cliRefusal(['evaluate', '--bundle', join(EXAMPLES, 'bundle.jsonl'), '--model', dir]),
    '#run-grade': cliRefusal(['grade', '--rubric', join(EXAMPLES, 'rubric/conversations.jsonl'), '--grader', dir]),
    '#run-statements': cliRefusal(['statements', '--input', join(EXAMPLES, 'statements/answers.jsonl'), '--nli', dir]),
  };
  const app = await openApp();
  try {
    const { page, consoleErrors } = app;
    await upload(page, ['bundle.jsonl', 'rubric/conversations.jsonl', 'statements/answers.jsonl']);
    await page.setInputFiles('#model-files', files);
    await page.selectOption('#opt-backend', 'cpu');
    for (const [button, cliMessage] of Object.entries(cliRefusals)) {
      await assert.rejects(run(page, button), (e) => {
        assert.match(e.message, /numbers that are not numbers are no verdict, so nothing is reported/);
        assert.deepEqual(nanFor(e.message), nanFor(cliMessage), button);
        return true;
      });
      // Nothing was shown as a result.
      const last = await page.evaluate(() => window.medrank.state.lastResult);
      assert.equal(last, null, `${button} left a result`);
    }
    // Training on it: the loss of the first step is NaN.
    await page.setInputFiles('#train-file', join(EXAMPLES, 'bundle.jsonl'));
    await page.waitForFunction(() => /bundle/.test(document.querySelector('#train-file-info').textContent), null, {
      timeout: 30000,
    });
    await page.selectOption('#train-task', 'nli');
    await page.check('input[name=train-dev][value=split]');
    for (const [id, v] of [
      ['#train-dev-split', 0.25],
      ['#train-epochs', 1],
      ['#train-batch', 2],
    ])
      await page.fill(id, String(v));
    await assert.rejects(trainFilledForm(page), /computed NaN or infinite loss for training step 1 of epoch 1/);
    // The page goes on working: the model-free Rubric job runs.
    await upload(page, ['rubric/graded.jsonl']);
    await run(page, '#run-rubric');
    assert.equal(await page.evaluate(() => window.medrank.state.lastResult.job), 'rubric');
    assert.deepEqual(consoleErrors, []);
  } finally {
    await app.close();
    rmSync(work, { recursive: true, force: true });
  }
});
