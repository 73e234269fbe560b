// The Controls job in a real browser: the page adds the control cases to the example bundle
// as `medrank controls` does (the same report, the same bundle to download). The job, its
// button, its tab and its options' defaults come from the engine; nothing of it is typed in
// the page but its drawing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, upload, run, setOptions, openTab, cli, differences, EXAMPLES } from './harness.mjs';

/** The report with its inputs named by file name (the CLI names them by path). */
function byFileName(report) {
  const copy = structuredClone(report);
  for (const f of copy.provenance.inputs) f.name = f.name.split('/').pop();
  return copy;
}

test('the Controls job adds the control cases as medrank controls does and downloads the bundle', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'medrank-controls-'));
  const args = ['controls', '--bundle', join(EXAMPLES, 'bundle.jsonl'), '--corpus', join(EXAMPLES, 'corpus.jsonl')];
  cli([...args, '--seed', '7', '--out', 'with_controls.jsonl', '--json', 'report.json', '--quiet'], dir);
  const expected = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
  const app = await openApp();
  try {
    const { page } = app;
    // Every control the inputs allow by default, as the CLI without --which.
    assert.equal(await page.inputValue('[data-option=which]'), 'all');
    await upload(page, ['bundle.jsonl', 'corpus.jsonl']);
    await setOptions(page, { seed: 7 });
    await run(page, '#run-controls');
    const result = await page.evaluate(() => window.medrank.state.lastResult.result);
    assert.deepEqual(differences(byFileName(result.report), byFileName(expected)), []);
    assert.deepEqual(result.report.added, ['no_argument', 'label_only', 'noise', 'ir_passages']);
    // The tab names the systems added to each of the 20 instances, and downloads the bundle.
    await openTab(page, 'Control cases');
    const said = await page.textContent('[data-view=control-cases] p');
    assert.equal(said, '4 control cases added to each of 20 instances: no_argument, label_only, noise, ir_passages.');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#controls-download')]);
    assert.equal(download.suggestedFilename(), 'bundle.with_controls.jsonl');
    const got = readFileSync(await download.path(), 'utf8');
    assert.equal(got, readFileSync(join(dir, 'with_controls.jsonl'), 'utf8'), 'the bundle the CLI writes with --out');
  } finally {
    await app.close();
  }
});
