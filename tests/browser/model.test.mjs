// Model choice: the bundled model is fetched from the site itself, stored with the Cache
// API, and "Clear cached models" removes it; a model picked from disk is read in the page.
// (What the model computes is checked against the CLI in encoder.test.mjs.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { openApp, upload, run, ROOT, SITE } from './harness.mjs';

test('the bundled model is cached in the browser and the clear button removes it', async (t) => {
  if (!existsSync(join(SITE, 'models/all-MiniLM-L6-v2/model.safetensors'))) {
    t.skip('the site was built without the default model: run scripts/setup.sh model, then scripts/build-web.sh');
    return;
  }
  const app = await openApp();
  try {
    const { page, requests, server } = app;
    // Loaded again under the service worker, with the 8-bit copy's facts shown: every
    // request of the page and its worker now goes through the service worker.
    await page.evaluate(() => navigator.serviceWorker.ready);
    await page.reload();
    await page.waitForFunction(() => navigator.serviceWorker.controller && !document.querySelector('#int8-facts').hidden, null, { timeout: 60000 });
    await upload(page, ['bundle.jsonl']);
    await page.check('input[name=model][value=bundled]');
    assert.equal(await page.isEnabled('#run-rank_systems'), true, 'a model replaces the predictions file');
    await page.selectOption('#opt-backend', 'cpu');
    await run(page, '#run-rank_systems');
    // Every model file the site serves (config, tokenizer, weights and the optional
    // sentence-transformers settings) is read and cached.
    const served = readdirSync(join(SITE, 'models/all-MiniLM-L6-v2'), { recursive: true }).filter((f) => statSync(join(SITE, 'models/all-MiniLM-L6-v2', f)).isFile());
    await page.waitForFunction(() => /Cached in this browser: \d+ model files/.test(document.querySelector('#model-status').textContent), null, { timeout: 10000 });
    // Exactly those: the 8-bit copy's facts, read at start-up, are not a model file a job
    // read (a load where the service worker took control first once counted them too).
    const cached = await page.evaluate(async () => (await (await caches.open('medrank-models-v1')).keys()).map((r) => new URL(r.url).pathname));
    assert.deepEqual(cached.sort(), served.map((f) => `/models/all-MiniLM-L6-v2/${f}`).sort());
    assert.equal(await page.textContent('#model-status'), `Cached in this browser: ${served.length} model files.`);
    const fetched = requests.filter((r) => r.url.includes('/models/all-MiniLM-L6-v2/')).map((r) => new URL(r.url));
    assert.ok(fetched.length >= 3 && fetched.every((u) => u.origin === new URL(server.url).origin));
    await page.click('#clear-models');
    await page.waitForFunction(() => /No model cached/.test(document.querySelector('#model-status').textContent), null, { timeout: 10000 });
  } finally {
    await app.close();
  }
});

test('a model picked from disk is read, cached, and cleared the same way', async (t) => {
  const dir = join(ROOT, 'models/all-MiniLM-L6-v2');
  if (!existsSync(join(dir, 'model.safetensors'))) {
    t.skip('no local model: run scripts/setup.sh model');
    return;
  }
  const app = await openApp();
  try {
    const { page } = app;
    await upload(page, ['bundle.jsonl']);
    await page.setInputFiles('#model-files', ['config.json', 'tokenizer.json', 'model.safetensors'].map((f) => join(dir, f)));
    assert.equal(await page.isChecked('input[name=model][value=local]'), true, 'picking files selects the local model');
    await page.selectOption('#opt-backend', 'cpu');
    await run(page, '#run-rank_systems');
    assert.match(await page.evaluate(() => window.medrank.state.lastResult.result.report.evaluators[0].evaluator), /\(similarity\)$/);
    await page.waitForFunction(() => /Cached in this browser: 3 model files/.test(document.querySelector('#model-status').textContent), null, { timeout: 10000 });
    // Nothing was sent anywhere: the files were read in the page.
    assert.ok(!app.requests.some((r) => r.url.includes('model.safetensors')));
    await page.click('#clear-models');
    await page.waitForFunction(() => /No model cached/.test(document.querySelector('#model-status').textContent), null, { timeout: 10000 });
  } finally {
    await app.close();
  }
});
