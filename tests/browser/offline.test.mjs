// Offline after the first visit (service worker), and Cancel on a long job.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, run, waitForChecks, screenshot } from './harness.mjs';

test('after one visit the page loads and evaluates the example with the network off', async () => {
  const app = await openApp();
  try {
    const { page, context } = app;
    await page.evaluate(async () => {
      await navigator.serviceWorker.ready;
    });
    // The worker's install stored the app; wait until this page is controlled by it.
    await page.reload();
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 30000 });
    await context.setOffline(true);
    await page.reload();
    await page.waitForFunction(() => document.querySelector('#version')?.textContent !== '—', null, { timeout: 30000 });
    await page.click('#load-example-2');
    await waitForChecks(page, 4);
    await run(page, '#run-rank_systems');
    assert.ok(await page.locator('table.ranking').count() > 0);
    await screenshot(page, '12-offline');
  } finally {
    await app.close();
  }
});

/** A bundle big enough that ranking takes a while in the browser. */
function bigInputs(n) {
  const systems = ['expert', 'gpt-4o', 'llama-3-70b', 'openbiollm-70b'];
  const bundle = [], predictions = ['instance,system,predicted,p_correct'];
  for (let i = 0; i < n; i++) {
    const args = Object.fromEntries(systems.map((s) => [s, `argument ${i} by ${s}`]));
    bundle.push(JSON.stringify({ id: `q${i}`, task: 'mcqa', question: `Question ${i}?`, options: { 1: 'a', 2: 'b', 3: 'c', 4: 'd', 5: 'e' }, answer: String(1 + (i % 5)), arguments: args }));
    systems.forEach((s, k) => {
      const right = (i * 7 + k * 13) % 10 < 8 - k;
      predictions.push(`q${i},${s},${right ? 1 + (i % 5) : 1 + ((i + 1) % 5)},${right ? 0.8 : 0.1}`);
    });
  }
  return { bundle: bundle.join('\n') + '\n', predictions: predictions.join('\n') + '\n' };
}

test('Cancel stops a long job, says so, and the page can run again', async () => {
  const app = await openApp();
  try {
    const { page } = app;
    const dir = mkdtempSync(join(tmpdir(), 'medrank-big-'));
    const { bundle, predictions } = bigInputs(20000);
    writeFileSync(join(dir, 'big_bundle.jsonl'), bundle);
    writeFileSync(join(dir, 'big_predictions.csv'), predictions);
    await page.setInputFiles('#file-input', [join(dir, 'big_bundle.jsonl'), join(dir, 'big_predictions.csv')]);
    await waitForChecks(page, 2);
    await page.click('.options summary');
    await page.fill('#opt-resamples', '5000');
    await page.click('#run-rank_systems');
    await page.waitForSelector('#progress:not([hidden])');
    await screenshot(page, '13-progress');
    await page.click('#cancel');
    await page.waitForFunction(() => !document.querySelector('#run-error').hidden, null, { timeout: 20000 });
    assert.match(await page.textContent('#run-error'), /Cancelled/);
    assert.equal(await page.isHidden('#progress'), true);
    // A fresh engine is ready again: a small run works.
    await page.fill('#opt-resamples', '50');
    await page.waitForFunction(() => document.querySelector('#version')?.textContent !== '—');
    await run(page, '#run-rank_systems');
    assert.ok(await page.locator('table.ranking').count() > 0);
  } finally {
    await app.close();
  }
});
