// Privacy by construction: record every request the page makes while a user loads it, adds
// their files and runs a full evaluation. Fail on any other origin, on any request carrying
// content (a body, or a query string), and on anything after the evaluation starts that is
// not a same-origin static file (the rule: harness.mjs's assertOwnStaticFilesOnly, which
// int8.test.mjs applies to a model run in 8-bit too).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openApp, upload, run, screenshot, assertOwnStaticFilesOnly } from './harness.mjs';

test('a full evaluation with uploaded files requests nothing but the site’s own static files', async () => {
  const app = await openApp();
  try {
    const { page, requests, server } = app;
    const origin = new URL(server.url).origin;
    await upload(page, ['bundle.jsonl', 'rankings.csv', 'predictions.csv', 'corpus.jsonl']);
    const evaluationStarts = Date.now();
    await run(page, '#run-rank_systems');
    await page.click('#tabs [role=tab]:text-is("Tables & export")');
    const download = page.waitForEvent('download');
    await page.locator('[data-export$=".csv"]').first().click();
    await download;
    await screenshot(page, '09-network-run');

    assert.ok(requests.length > 0, 'the recorder saw the page load');
    assertOwnStaticFilesOnly(requests, origin, evaluationStarts);
  } finally {
    await app.close();
  }
});
