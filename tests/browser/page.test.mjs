// The page loads from `medrank serve`, with the strict policy, its empty states, and inline
// validation errors that name file, line and field.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, screenshot, waitForChecks, SITE } from './harness.mjs';

let app;
before(async () => {
  app = await openApp();
});
after(async () => {
  await app?.close();
});

test('the server sends the wasm type and the same strict policy as the page, connecting to the site and the Hub alone', async () => {
  const { page, server } = app;
  const res = await page.request.get(server.url);
  const csp = res.headers()['content-security-policy'];
  const meta = await page.$eval('meta[http-equiv=Content-Security-Policy]', (m) => m.content);
  // frame-ancestors works only as a header.
  assert.equal(csp, `${meta}; frame-ancestors 'none'`);
  // connect-src: the site, and the Hub's hosts a model download may reach (the Hub and the
  // storage hosts it redirects to: src/hub/listing.rs, PUBLIC_HUB_SOURCES).
  assert.match(
    meta,
    /^default-src 'self'; connect-src 'self' https:\/\/huggingface\.co https:\/\/\*\.huggingface\.co https:\/\/hf\.co https:\/\/\*\.hf\.co; script-src 'self' 'wasm-unsafe-eval'/,
  );
  const wasm = await page.request.get(new URL('pkg/medrank_bg.wasm', server.url).href);
  assert.equal(wasm.headers()['content-type'], 'application/wasm');
});

test('a fresh page shows its empty states, the engine version and no console errors', async () => {
  const { page, consoleErrors } = app;
  assert.equal(await page.isVisible('#files-empty'), true);
  assert.equal(await page.isVisible('#results-empty'), true);
  assert.match(await page.textContent('#version'), /^\d+\.\d+\.\d+/);
  // Nothing to run yet: the run buttons say what they need.
  assert.equal(await page.isDisabled('#run-rank_systems'), true);
  assert.match(await page.getAttribute('#run-rank_systems', 'title'), /Needs: Argument bundle/);
  await screenshot(page, '01-empty');
  assert.deepEqual(consoleErrors, []);
});

test('a broken file is marked inline with its file, line and field', async () => {
  const { page } = app;
  const dir = mkdtempSync(join(tmpdir(), 'medrank-bad-'));
  const good = '{"id":"q1","task":"mcqa","question":"Q?","options":{"1":"a","2":"b"},"answer":"1","arguments":{"expert":"because"}}';
  const bad = '{"id":"q2","task":"mcqa","question":"Q?","options":{"1":"a","2":"b"},"answer":"7","arguments":{"expert":"because"}}';
  writeFileSync(join(dir, 'broken_bundle.jsonl'), `${good}\n${bad}\n`);
  await page.setInputFiles('#file-input', [join(dir, 'broken_bundle.jsonl')]);
  await waitForChecks(page, 1);
  const row = page.locator('tr[data-file="broken_bundle.jsonl"]');
  const message = await row.locator('.issue.bad').textContent();
  assert.match(message, /broken_bundle\.jsonl, line 2, field “answer”/);
  await screenshot(page, '02-validation-error');
  await row.getByRole('button', { name: /Remove/ }).click();
  assert.equal(await page.isVisible('#files-empty'), true);
});

test('the page is usable from the keyboard: the drop zone opens the picker with Enter or Space', async () => {
  const { page } = app;
  // Count clicks on the hidden file input (what opens the system's file picker). Waiting for
  // Playwright's filechooser event instead is unreliable after an earlier setInputFiles.
  await page.evaluate(() => {
    window.pickerOpened = 0;
    document.querySelector('#file-input').addEventListener('click', (e) => {
      window.pickerOpened++;
      e.preventDefault();
    });
  });
  await page.focus('#drop');
  await page.keyboard.press('Enter');
  await page.keyboard.press(' ');
  assert.equal(await page.evaluate(() => window.pickerOpened), 2);
  assert.equal(await page.getAttribute('#drop', 'role'), 'button');
  assert.equal(await page.getAttribute('#drop', 'tabindex'), '0');
});

test('no file the site serves names another origin, but the policy the Hub', () => {
  const walk = (d) => readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : [join(d, f)]));
  const text = /\.(html|js|mjs|css|json|jsonl|csv|tsv|txt|xml|md)$/;
  const files = walk(SITE).filter((f) => text.test(f));
  assert.ok(files.some((f) => f.endsWith('index.html')) && files.some((f) => f.endsWith('pkg/medrank.js')));
  for (const f of files) {
    const urls = readFileSync(f, 'utf8').match(/(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}[^\s"')]*/gi) || [];
    // XML namespace names are identifiers, never fetched; the Apache licence link in the
    // thread pool helper's licence header (wasm-bindgen-rayon) is text.
    const external = urls.filter((u) => !/\/\/www\.w3\.org\/(2000\/svg|1999\/xhtml|1999\/xlink)|\/\/www\.apache\.org\/licenses\//.test(u))
      // index.html's policy names the Hub's hosts (connect-src).
      .filter((u) => !(f.endsWith('/index.html') && /^https:\/\/(huggingface\.co|hf\.co)$/.test(u)));
    assert.deepEqual(external, [], f);
  }
});
