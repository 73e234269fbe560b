// HealthBench's public files in the page (issue 47, item 8): the page recognises them and
// imports them itself, as `medrank import healthbench` does, listing the imported rubric
// file beside them under the kind the jobs read: the meta-evaluation file becomes people's
// judgements (Agreement then gives `medrank rubric-agreement`'s report on the CLI's
// imported file), an eval file with its completions becomes responses to grade (the
// CLI's --out file byte for byte). The example loader loads only files the page uses.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, upload, waitForChecks, run, cli, differences, EXAMPLES } from './harness.mjs';

const HB = 'rubric/healthbench';

let app;
before(async () => {
  app = await openApp();
});
after(async () => {
  await app?.close();
});

/** `medrank import healthbench` into a temporary folder, under the name the page gives it. */
function cliImport(input, completions) {
  const out = join(mkdtempSync(join(tmpdir(), 'medrank-hb-')), `${input.replace(/\.jsonl$/, '')}.imported.jsonl`);
  cli([
    'import',
    'healthbench',
    '--input',
    join(EXAMPLES, HB, input),
    ...(completions ? ['--completions', join(EXAMPLES, HB, completions)] : []),
    '--out',
    out,
  ]);
  return out;
}

/** Each listed file's kind, check text and imported-from line. */
const listed = (page) =>
  page.evaluate(() =>
    [...document.querySelectorAll('#files tbody tr')].map((tr) => ({
      name: tr.dataset.file,
      kind: tr.querySelector('select').value,
      check: tr.querySelector('td.check').textContent,
      details: tr.querySelector('td .muted.small')?.textContent ?? '',
    })),
  );

const fileText = (page, name) =>
  page.evaluate((n) => window.medrank.state.files.find((f) => f.name === n)?.text, name);

test('a HealthBench meta-evaluation file is imported by the page: Agreement gives the CLI’s report on it', async () => {
  const { page } = app;
  await page.click('#clear-files');
  await upload(page, [`${HB}/meta_eval.jsonl`, `${HB}/meta_eval_grader.jsonl`]);
  await waitForChecks(page, 3);
  const files = await listed(page);
  const meta = files.find((f) => f.name === 'meta_eval.jsonl');
  assert.equal(meta.kind, 'healthbench');
  assert.equal(
    meta.check,
    '✓ HealthBench meta-evaluation file: 14 labelled pairs imported as meta_eval.imported.jsonl ' +
      '(6 responses, 14 criteria, 32 physicians’ labels)',
  );
  const imported = files.find((f) => f.name === 'meta_eval.imported.jsonl');
  assert.ok(imported, `the imported file is listed: ${JSON.stringify(files)}`);
  assert.equal(imported.kind, 'rubric_judged');
  assert.match(imported.details, /^imported from meta_eval\.jsonl, /);
  assert.equal(imported.check, '✓ 6 responses, 14 criteria judged by 4 people');
  const cliFile = cliImport('meta_eval.jsonl');
  assert.equal(await fileText(page, 'meta_eval.imported.jsonl'), readFileSync(cliFile, 'utf8'));

  // Agreement on it: the report `medrank rubric-agreement` writes on the CLI's import.
  await run(page, '#run-rubric_agreement');
  const { result } = await page.evaluate(() => window.medrank.state.lastResult);
  const out = join(mkdtempSync(join(tmpdir(), 'medrank-hb-agreement-')), 'r.json');
  cli(['rubric-agreement', '--input', cliFile, '--grader-file', join(EXAMPLES, HB, 'meta_eval_grader.jsonl'), '--json', out, '--quiet']);
  const expected = JSON.parse(readFileSync(out, 'utf8'));
  const baseNames = (report) => {
    const c = structuredClone(report);
    for (const f of c.provenance.inputs) f.name = f.name.split('/').pop();
    for (const w of c.warnings) if (w.location?.file) w.location.file = w.location.file.split('/').pop();
    return c;
  };
  assert.deepEqual(differences(baseNames(result.report), baseNames(expected)), []);

  // Removing the HealthBench file removes what was imported from it.
  await page.click('button[aria-label="Remove meta_eval.jsonl"]');
  assert.deepEqual(
    (await listed(page)).map((f) => f.name),
    ['meta_eval_grader.jsonl'],
  );
});

test('a HealthBench eval file says it needs its completions, then is imported with them as responses to grade', async () => {
  const { page } = app;
  await page.click('#clear-files');
  await upload(page, [`${HB}/eval.jsonl`]);
  let files = await listed(page);
  assert.deepEqual(
    files.map((f) => [f.name, f.kind, f.check]),
    [
      [
        'eval.jsonl',
        'healthbench',
        '✓ HealthBench eval file: 3 prompts with rubrics (10 criteria); add its completions file ' +
          '(prompt_id, system, response: the responses to grade) and the page imports both',
      ],
    ],
  );
  await upload(page, [`${HB}/completions.jsonl`]);
  await page.waitForFunction(() => document.querySelector('tr[data-file="eval.imported.jsonl"] td.check')?.textContent.startsWith('✓'), null, {
    timeout: 60000,
  });
  await waitForChecks(page, 3);
  files = await listed(page);
  const byName = Object.fromEntries(files.map((f) => [f.name, f]));
  assert.equal(byName['completions.jsonl'].kind, 'healthbench_completions');
  assert.equal(
    byName['completions.jsonl'].check,
    '✓ 5 completions from 2 systems (model-a, model-b); the page imports them with the HealthBench eval file they answer',
  );
  // The import's warning (a prompt model-b did not answer) is the CLI's, not dropped.
  assert.match(
    byName['eval.jsonl'].check,
    /^⚠ HealthBench eval file: 3 prompts with completions\.jsonl imported as eval\.imported\.jsonl \(5 responses to grade, 17 criteria\)/,
  );
  assert.match(byName['eval.jsonl'].check, /without a completion from system `model-b`/);
  assert.equal(byName['eval.imported.jsonl'].kind, 'rubric_responses');
  assert.equal(byName['eval.imported.jsonl'].check, '✓ 5 responses to grade (17 criteria), 2 systems');
  assert.equal(
    await fileText(page, 'eval.imported.jsonl'),
    readFileSync(cliImport('eval.jsonl', 'completions.jsonl'), 'utf8'),
  );
  // Grade reads it: its button asks for a grader only.
  assert.match(await page.getAttribute('#run-grade', 'title'), /grader/i);
});

test('the example loader loads only files the page can use, each recognised', async () => {
  const { page } = app;
  await page.click('#clear-files');
  await page.click('#load-example-2');
  await page.waitForFunction(() => /Example loaded/.test(document.querySelector('#live').textContent), null, {
    timeout: 60000,
  });
  await waitForChecks(page, 10);
  const files = await listed(page);
  assert.ok(!files.some((f) => f.name === 'sentences.txt'), 'sentences.txt (medrank embed’s input) is not loaded');
  const unrecognised = files.filter((f) => !f.kind || f.check.startsWith('✗'));
  assert.deepEqual(unrecognised, [], 'every example file has a kind and passes its check');
});
