// The Draft job in a real browser (issue 44): the page drafts a rubric from the example's
// prompts and evidence as `medrank rubric-draft` does (the same report, the same drafted
// file), shows each criterion in the passage it was cut from, and a reviewer edits one
// criterion (its text, points and tags), deletes one and adds one. The reviewed rubric goes
// to Grade at once; Grade's report is `medrank grade`'s on the file the page downloads, and
// the run asks nothing but the site's own static files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import {
  openApp,
  upload,
  run,
  openTab,
  cli,
  cliHas,
  differences,
  differencesAbs,
  assertOwnStaticFilesOnly,
  readExample,
  ROOT,
  EXAMPLES,
  ARTIFACTS,
} from './harness.mjs';
import { writeRandomBert } from './random-model.mjs';

const TOKENIZER = join(ROOT, 'models/all-MiniLM-L6-v2/tokenizer.json');
const SKIP =
  (!existsSync(TOKENIZER) && 'no model in models/: run scripts/setup.sh model') ||
  (!cliHas('rubric-draft') && 'this medrank binary has no `rubric-draft`');
/** P(met) and scores computed by wasm and natively: f32 sums in another order. */
const TOLERANCE = 1e-5;
const FILES = ['draft/prompts.jsonl', 'draft/guideline.md', 'draft/formulary.tsv'];

/** The report with its inputs (and grader) named by file name: the CLI names them by path. */
function byFileName(report) {
  const copy = structuredClone(report);
  for (const f of copy.provenance.inputs) f.name = basename(f.name);
  if (copy.grader) copy.grader.model = basename(copy.grader.model);
  return copy;
}

const jsonLines = (text) => text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));

test('the page drafts, a reviewer edits a criterion, and Grade on the reviewed rubric is medrank grade on the downloaded file', { skip: SKIP }, async () => {
  const work = mkdtempSync(join(tmpdir(), 'medrank-draft-'));
  const app = await openApp();
  try {
    // The CLI's draft of the same files, at the defaults the page starts at, given by their
    // names as the page has them (a Markdown file's document id is its name as given).
    const evidence = FILES.slice(1).flatMap((f) => ['--evidence', basename(f)]);
    cli(
      [
        'rubric-draft', '--prompts', basename(FILES[0]), ...evidence, '--out', join(work, 'draft.jsonl'),
        '--json', join(work, 'draft.json'), '--quiet',
      ],
      join(EXAMPLES, 'draft'),
    );
    const expected = JSON.parse(readFileSync(join(work, 'draft.json'), 'utf8'));
    const draftedFile = readFileSync(join(work, 'draft.jsonl'), 'utf8');

    const { page, requests, server } = app;
    await upload(page, FILES);
    const kind = (name) => page.locator(`tr[data-file="${name}"] select`).inputValue();
    const check = (name) => page.locator(`tr[data-file="${name}"] td.check`).textContent();
    assert.equal(await kind('prompts.jsonl'), 'draft_prompts');
    assert.equal(await kind('guideline.md'), 'evidence');
    assert.equal(await kind('formulary.tsv'), 'documents');
    assert.match(await check('prompts.jsonl'), /2 prompts, 3 responses to grade, 3 statements of experts/);
    assert.match(await check('guideline.md'), /1 document \(markdown\)/);
    const started = Date.now();
    await run(page, '#run-draft');
    const { result } = await page.evaluate(() => window.medrank.state.lastResult);
    assert.deepEqual(differences(byFileName(result.report), byFileName(expected)), []);
    assert.equal(result.draft_view.rubric_jsonl, draftedFile, 'the file `rubric-draft --out` writes');

    // Each criterion in its passage, the statement marked: the document's characters
    // source.start..source.end (code points, as FORMATS §7 counts them).
    await openTab(page, 'Draft');
    const guideline = [...readExample('draft/guideline.md')];
    const aom1 = expected.prompts.find((p) => p.id === 'aom-1');
    const first = aom1.criteria[0];
    assert.equal(first.document, 'guideline.md');
    const section = page.locator('.draft-prompt[data-prompt="aom-1"]');
    const items = section.locator('li.draft-criterion');
    assert.equal(await items.count(), aom1.criteria.length);
    assert.equal(await items.nth(0).locator('mark').textContent(), guideline.slice(first.start, first.end).join(''));
    assert.equal(await items.nth(0).locator('textarea').inputValue(), first.criterion);
    await section.screenshot({ path: join(ARTIFACTS, 'draft-review.png') });

    // The review: criterion 1 of aom-1 edited (text, points, tags), its criterion 2
    // deleted; aom-2's criterion 1 not kept, and a criterion added to it, which starts at
    // the draft's points and tags.
    const edited = 'Gives paracetamol or ibuprofen for the ear pain';
    await items.nth(0).locator('textarea').fill(edited);
    await items.nth(0).locator('.draft-points').fill('7');
    await items.nth(0).locator('.draft-tags').fill('axis:accuracy, level:example');
    await items.nth(1).locator('.draft-delete').click();
    assert.equal(await items.count(), aom1.criteria.length - 1);
    const aom2 = page.locator('.draft-prompt[data-prompt="aom-2"]');
    await aom2.locator('li.draft-criterion').first().locator('.draft-keep').uncheck();
    await aom2.locator('.draft-add').click();
    const added = aom2.locator('li.draft-criterion').last();
    await added.locator('textarea').fill('Asks how severe the allergic reaction was');
    assert.match(await added.locator('.draft-source').textContent(), /no source in the evidence/);

    // The file it downloads: the drafted lines with the review in them, worked out here
    // from the CLI's draft.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#draft-download')]);
    assert.equal(download.suggestedFilename(), 'prompts.draft.jsonl');
    const reviewed = readFileSync(await download.path(), 'utf8');
    const want = jsonLines(draftedFile).map((line) => {
      const criteria = structuredClone(line.criteria);
      if (line.id === 'aom-1') {
        Object.assign(criteria[0], { criterion: edited, points: 7, tags: ['axis:accuracy', 'level:example'] });
        criteria.splice(1, 1);
      } else {
        criteria.shift();
        criteria.push({ criterion: 'Asks how severe the allergic reaction was', points: criteria[0].points, tags: criteria[0].tags });
      }
      return { ...line, criteria };
    });
    assert.deepEqual(jsonLines(reviewed), want);

    // A grader the CLI makes: a tiny random BERT with an NLI head trained on the NLI
    // fixture (its P(met) mean nothing; the page and the CLI must agree on them).
    const base = join(work, 'tiny-bert');
    // Weights of scale 0.5 set texts apart: P(met) from 0.65 to 0.69 on this draft.
    writeRandomBert(base, TOKENIZER, { layers: 2, hidden: 32, heads: 4, seed: 44, scale: 0.5 });
    const grader = join(work, 'nli-grader');
    const fx = join(ROOT, 'tests/fixtures/train_nli');
    cli([
      'train', '--model', base, '--train', join(fx, 'train.jsonl'), '--dev', join(fx, 'dev.jsonl'), '--task', 'nli',
      '--arguments', 'none', '--freeze', 'head', '--epochs', '3', '--lr', '0.05', '--out', grader,
    ]);
    await page.check('input[name=model][value=local]');
    await page.setInputFiles('#model-folder', grader);
    await page.selectOption('#opt-backend', 'cpu');

    // Grade with this rubric: the reviewed file joins the files and is graded at once.
    await page.evaluate(() => { window.__draftResult = window.medrank.state.lastResult; });
    await page.click('#draft-grade');
    await page.waitForFunction(
      () => (window.medrank.state.lastResult !== window.__draftResult && !window.medrank.state.running)
        || !document.querySelector('#run-error').hidden,
      null,
      { timeout: 120000 },
    );
    const error = await page.$eval('#run-error', (e) => (e.hidden ? null : e.textContent));
    assert.equal(error, null);
    assert.equal(await kind('prompts.draft.jsonl'), 'rubric_responses');
    const graded = await page.evaluate(() => window.medrank.state.lastResult);
    assert.equal(graded.job, 'grade');
    writeFileSync(join(work, 'prompts.draft.jsonl'), reviewed);
    cli([
      'grade', '--rubric', join(work, 'prompts.draft.jsonl'), '--grader', grader, '--json', join(work, 'grade.json'),
      '--backend', 'cpu', '--quiet',
    ]);
    const native = JSON.parse(readFileSync(join(work, 'grade.json'), 'utf8'));
    // Every reviewed criterion of every response graded, the edited one among them.
    assert.equal(graded.result.report.criteria.length, want.reduce((n, l) => n + l.criteria.length, 0));
    assert.ok(graded.result.report.criteria.some((c) => c.criterion === edited));
    assert.deepEqual(differencesAbs(byFileName(graded.result.report), byFileName(native), TOLERANCE), []);

    // Privacy: drafting and grading asked nothing but the site's own static files.
    assertOwnStaticFilesOnly(requests, new URL(server.url).origin, started);
  } finally {
    await app.close();
    rmSync(work, { recursive: true, force: true });
  }
});
