// The page as a hospital user meets it (issue 28): a keyboard-only run, the Model section's
// account of what each evaluator can judge, and nothing cut at 1280, 1024 and 768 px with
// the example loaded, the options and the training panel open, a job's progress area, a
// ranking's results and then NRP's, Metrics' and Rubric's on screen. One page serves every
// check.
//
// What counts as cut (checked in the page, for every rendered element):
//  - the page scrolls sideways: document.documentElement.scrollWidth > innerWidth;
//  - an element's content is wider than its box (scrollWidth > clientWidth + 1), unless the
//    nearest box that does not let it spill (overflow-x other than visible: the element
//    itself or an ancestor) is a scroll container (overflow-x auto/scroll) that the keyboard
//    can reach (tabindex >= 0, so arrow keys scroll it), as a result tab's panel holding a
//    wide table is. Content that spills with no such container covers its neighbours or
//    leaves the page; content in an overflow hidden/clip box is cut;
//  - a <select> whose longest option (measured on a canvas in the select's own font) is
//    wider than the room the select gives its text: its width less its padding and the
//    drop-down arrow, the arrow measured on an auto-width copy holding only that option;
//  - two pieces of text (text nodes' line boxes, as far as the boxes around them show them)
//    that overlap by more than 2 px each way.
// Elements hidden by design for sighted users (the .sr-only pattern: clip rect(0 0 0 0)) and
// their contents are left out.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openApp, upload, waitForChecks, run, screenshot, pageTrain, setOptions, ARTIFACTS, ROOT, SITE } from './harness.mjs';

const WIDTHS = [1280, 1024, 768];
let app;
before(async () => {
  app = await openApp();
});
after(async () => {
  await app?.close();
});

/** The focused element, described, with whether it shows a focus indicator. */
function describeFocus() {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const cs = getComputedStyle(e);
  const outline = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0;
  const shadow = cs.boxShadow && cs.boxShadow !== 'none';
  return {
    what: `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${e.getAttribute('role') ? `[role=${e.getAttribute('role')}]` : ''} “${(e.getAttribute('aria-label') || e.textContent || e.value || '').trim().slice(0, 40)}”`,
    id: e.id,
    role: e.getAttribute('role'),
    selected: e.getAttribute('aria-selected'),
    indicator: Boolean(outline || shadow),
  };
}

/** Press `key` (Tab or Shift+Tab) until the focused element matches `selector`; every
 *  element passed on the way is recorded in `reached`. */
async function tabUntil(page, selector, reached, key = 'Tab', max = 300) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press(key);
    const focus = await page.evaluate(describeFocus);
    if (focus) reached.push(focus);
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return focus;
  }
  throw new Error(
    `${max} presses of ${key} never reached ${selector}; reached: ${reached.map((r) => r.what).join(', ')}`,
  );
}

async function waitForJob(page) {
  await page.waitForFunction(
    () =>
      !window.medrank.state.running &&
      (window.medrank.state.lastResult !== window.__resultBeforeRun || !document.querySelector('#run-error').hidden),
    null,
    { timeout: 120000 },
  );
  const error = await page.$eval('#run-error', (e) => (e.hidden ? null : e.textContent));
  if (error) throw new Error(`the page reported: ${error}`);
}

test('a keyboard-only run: load the example, rank, switch result tabs, download the JSON', async () => {
  const { page } = app;
  const reached = [];
  // From the top of the page to the "Load the example" button of "How to use".
  await tabUntil(page, '#load-example', reached);
  await page.keyboard.press('Enter');
  await waitForChecks(page, 4);
  // The page moves focus to "Rank systems" once the example is checked.
  await page.waitForFunction(() => document.activeElement?.id === 'run-rank_systems' && !document.activeElement.disabled);
  // The whole tab order with the example loaded (the files' kind choosers and parameters,
  // the model choices, the run buttons, the training panel...): up to the skip link, down to
  // the footer's link, back up to "Rank systems". Every stop must show where the focus is.
  await tabUntil(page, 'a.skip', reached, 'Shift+Tab');
  await tabUntil(page, 'footer a', reached);
  await tabUntil(page, '#run-rank_systems', reached, 'Shift+Tab');
  for (const id of ['drop', 'load-example-2', 'opt-backend', 'run-nrp', 'train-task', 'train-file'])
    assert.ok(
      reached.some((r) => r.id === id),
      `#${id} is in the tab order`,
    );
  assert.ok(
    reached.some((r) => r.what.startsWith('select') && r.what.includes('Kind of bundle.jsonl')),
    'the files’ kind choosers are in the tab order',
  );
  await page.evaluate(() => {
    window.__resultBeforeRun = window.medrank.state.lastResult;
  });
  await page.keyboard.press(' ');
  await waitForJob(page);
  assert.ok((await page.locator('table.ranking').count()) > 0, 'the ranking is shown');

  // On to the result tabs: the selected tab is the one in the tab order (roving tabindex).
  const tab = await tabUntil(page, '#tabs [role=tab]', reached);
  assert.equal(tab.selected, 'true', 'Tab lands on the selected tab');
  const selectedTab = () =>
    page.evaluate(() => {
      const t = document.querySelector('#tabs [aria-selected=true]');
      const panel = document.getElementById(t.getAttribute('aria-controls'));
      return { text: t.textContent, focused: document.activeElement === t, panelShown: !panel.hidden };
    });
  assert.equal((await selectedTab()).text, 'Ranking');
  await page.keyboard.press('ArrowRight');
  assert.deepEqual(await selectedTab(), { text: 'Heatmap', focused: true, panelShown: true });
  await page.keyboard.press('End');
  assert.deepEqual(await selectedTab(), { text: 'Provenance', focused: true, panelShown: true });
  await page.keyboard.press('ArrowRight'); // wraps round
  assert.deepEqual(await selectedTab(), { text: 'Ranking', focused: true, panelShown: true });
  await page.keyboard.press('ArrowLeft');
  assert.deepEqual(await selectedTab(), { text: 'Provenance', focused: true, panelShown: true });
  await page.keyboard.press('Home');
  await page.keyboard.press('ArrowRight');
  assert.deepEqual(await selectedTab(), { text: 'Heatmap', focused: true, panelShown: true });
  reached.push(await page.evaluate(describeFocus));
  // The panel follows its tab in the tab order.
  await page.keyboard.press('Tab');
  const panel = await page.evaluate(describeFocus);
  reached.push(panel);
  assert.equal(panel.role, 'tabpanel');

  // Back to "Download JSON" and save the report with Enter.
  await tabUntil(page, '#download-json', reached, 'Shift+Tab');
  const download = page.waitForEvent('download');
  await page.keyboard.press('Enter');
  const saved = await download;
  assert.equal(saved.suggestedFilename(), 'medrank-rank_systems.json');
  const report = JSON.parse(readFileSync(await saved.path(), 'utf8'));
  assert.ok(report.evaluators.length > 0);

  const without = reached.filter((r) => !r.indicator).map((r) => r.what);
  assert.deepEqual([...new Set(without)], [], 'every element reached shows a focus indicator');
});

test('the training form says which files train what, rubric files for a criterion grader included', async () => {
  const { page } = app;
  assert.equal(
    (await page.textContent('#train-file-help')).replace(/\s+/g, ' '),
    'an argument bundle with gold labels, a HiTZ MCQA file, or, to train a criterion grader for Grade, a rubric file ' +
      'whose criteria were judged (met, or people’s met_by as medrank import healthbench writes HealthBench’s meta-evaluation file)',
  );
});

test('the Model section says what each choice can and cannot judge', async () => {
  const { page } = app;
  const help = async (choice) => {
    const text = await page.textContent(`[data-model-help=${choice}]`);
    return text.replace(/\s+/g, ' ');
  };
  // Each radio is described by its text (aria-describedby), so a screen reader says it too.
  for (const choice of ['predictions', 'bundled', 'local']) {
    const id = await page.getAttribute(`input[name=model][value=${choice}]`, 'aria-describedby');
    assert.equal(await page.getAttribute(`#${id}`, 'data-model-help'), choice);
  }
  assert.match(await help('predictions'), /evaluator is whatever produced the predictions file/);
  const bundled = await help('bundled');
  assert.match(bundled, /zero-training similarity baseline, for multiple-choice questions \(MCQA\) only/);
  assert.match(bundled, /no classification head/);
  assert.match(bundled, /closest to the question plus the argument/);
  assert.match(bundled, /weak/);
  assert.match(bundled, /cannot judge misinformation or NLI/);
  assert.match(bundled, /paper’s evaluators are fine-tuned encoders/);
  const local = await help('local');
  assert.match(local, /depends on its head/);
  assert.match(local, /multiple-choice head judges MCQA/);
  assert.match(local, /sequence-classification head judges the tasks whose labels it names/);
  assert.match(local, /no head: the same similarity baseline/);
  assert.match(await help('trained'), /trained in this page .* judges the task it was trained for/);
  for (const choice of ['predictions', 'bundled', 'local', 'trained'])
    assert.equal(await page.isVisible(`[data-model-help=${choice}]`), true, choice);
});

/** Everything cut on the page as it is now (see the header for the rules). */
function findCuts() {
  const cuts = [];
  const name = (e) =>
    `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${typeof e.className === 'string' && e.className ? `.${e.className.trim().split(/\s+/).join('.')}` : ''}`;
  const path = (e) => {
    const parts = [];
    for (let n = e; n && n !== document.body && parts.length < 4; n = n.parentElement) parts.unshift(name(n));
    return parts.join(' > ');
  };
  const srOnly = (e) => {
    for (let n = e; n; n = n.parentElement) {
      const cs = getComputedStyle(n);
      if (cs.clip === 'rect(0px, 0px, 0px, 0px)') return true;
    }
    return false;
  };
  // checkVisibility() also leaves out the content of a closed <details>, which keeps
  // (stale) boxes that getClientRects() still reports.
  const rendered = (e) =>
    e.getClientRects().length > 0 && e.checkVisibility({ visibilityProperty: true }) && !srOnly(e);

  if (document.documentElement.scrollWidth > innerWidth)
    cuts.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px in a ${innerWidth} px window`);

  const elements = [...document.body.querySelectorAll('*')].filter(rendered);
  for (const e of elements) {
    if (e.clientWidth === 0 || e.scrollWidth <= e.clientWidth + 1) continue;
    let box = e;
    while (box && box !== document.documentElement && getComputedStyle(box).overflowX === 'visible')
      box = box.parentElement;
    const overflow = box && box !== document.documentElement ? getComputedStyle(box).overflowX : 'the page';
    const scrolls = overflow === 'auto' || overflow === 'scroll';
    if (scrolls && box.tabIndex >= 0) continue; // a scroll container the keyboard reaches
    cuts.push(
      `${path(e)}: content ${e.scrollWidth} px in ${e.clientWidth} px (held by ${box === e ? 'itself' : box && box !== document.documentElement ? name(box) : 'the page'}, overflow-x ${overflow}${scrolls ? ', not keyboard-reachable' : ''})`,
    );
  }

  const ctx = document.createElement('canvas').getContext('2d');
  const textWidth = (font, text) => {
    ctx.font = font;
    return ctx.measureText(text).width;
  };
  for (const s of elements.filter((e) => e.tagName === 'SELECT')) {
    const cs = getComputedStyle(s);
    const pad = parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight);
    const [longest, width] = [...s.options]
      .map((o) => [o.text, textWidth(cs.font, o.text)])
      .reduce((a, b) => (b[1] > a[1] ? b : a), ['', 0]);
    // The arrow's room: an auto-width copy of the select (same classes, so the same style)
    // holding only the longest option is exactly as wide as text + padding + arrow.
    const probe = s.cloneNode(false);
    probe.removeAttribute('id');
    probe.style.cssText = 'position:absolute;left:-9999px;width:auto;min-width:0;max-width:none';
    probe.append(new Option(longest));
    s.parentElement.append(probe);
    const arrow =
      probe.getBoundingClientRect().width -
      parseFloat(cs.borderLeftWidth) -
      parseFloat(cs.borderRightWidth) -
      pad -
      width;
    probe.remove();
    const room = s.clientWidth - pad - arrow;
    if (width > room + 0.5)
      cuts.push(
        `${path(s)} “${s.getAttribute('aria-label') || s.id}”: option “${longest}” needs ${Math.ceil(width)} px, has ${Math.floor(room)} px`,
      );
  }

  // A file picker narrower than its button and its "No file chosen" (Chromium then cuts
  // the text to "No fil…hosen"): measured as the selects are, on an auto-width copy.
  for (const input of elements.filter((e) => e.tagName === 'INPUT' && e.type === 'file')) {
    const probe = input.cloneNode(false);
    probe.removeAttribute('id');
    probe.style.cssText = 'position:absolute;left:-9999px;width:auto;min-width:0;max-width:none';
    input.parentElement.append(probe);
    const needs = probe.getBoundingClientRect().width;
    probe.remove();
    const has = input.getBoundingClientRect().width;
    if (has + 0.5 < needs)
      cuts.push(`${path(input)} “${input.getAttribute('aria-label') || input.id}”: the file picker needs ${Math.ceil(needs)} px, has ${Math.floor(has)} px`);
  }

  // A file's parameter label ("system", "prompt") beside its own field: its text and the
  // field share a line, or the field starts right below the text, at its left edge (never
  // the word at a line's end and its field at the next line's start).
  for (const label of elements.filter((e) => e.tagName === 'LABEL' && e.closest('#files'))) {
    const field = label.querySelector('input:not([type=checkbox]), select');
    const text = [...label.childNodes].find((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!field || !text) continue;
    const range = document.createRange();
    range.selectNodeContents(text);
    const line = range.getClientRects()[0];
    const box = field.getBoundingClientRect();
    const sameLine = line && box.top < line.bottom && box.bottom > line.top;
    const rightBelow = line && box.top >= line.bottom - 1 && box.top - line.bottom < 8 && Math.abs(box.left - line.left) <= 2;
    if (line && !sameLine && !rightBelow)
      cuts.push(`${path(label)} “${text.textContent.trim()}”: its field is not beside it (wrapped away)`);
  }

  // Text boxes: every non-blank text node's line boxes, outside SVG (charts place their
  // own labels) and outside form controls' internals, each cut to what its scrolling or
  // clipping ancestors show (a list scrolled inside its box hides the rest of its lines,
  // which then cover nothing).
  const shown = (r, node) => {
    let { left, top, right, bottom } = r;
    for (let n = node.parentElement; n && n !== document.documentElement; n = n.parentElement) {
      const cs = getComputedStyle(n);
      const c = n.getBoundingClientRect();
      if (cs.overflowX !== 'visible') [left, right] = [Math.max(left, c.left), Math.min(right, c.right)];
      if (cs.overflowY !== 'visible') [top, bottom] = [Math.max(top, c.top), Math.min(bottom, c.bottom)];
    }
    return right > left && bottom > top ? { left, top, right, bottom } : null;
  };
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    if (!t.textContent.trim()) continue;
    const parent = t.parentElement;
    if (!parent || parent.closest('svg, select, option, script, style') || !rendered(parent)) continue;
    const range = document.createRange();
    range.selectNodeContents(t);
    for (const line of range.getClientRects()) {
      const r = line.width > 0 && line.height > 0 ? shown(line, t) : null;
      if (r) boxes.push({ t, r });
    }
  }
  const seen = new Set();
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i],
        b = boxes[j];
      if (a.t === b.t) continue;
      const w = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
      const h = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
      if (w > 2 && h > 2) {
        const key = `${path(a.t.parentElement)} “${a.t.textContent.trim().slice(0, 30)}” overlaps ${path(b.t.parentElement)} “${b.t.textContent.trim().slice(0, 30)}”`;
        if (!seen.has(key)) cuts.push(key);
        seen.add(key);
      }
    }
  }
  return cuts;
}

test('nothing is cut at 1280, 1024 and 768 px: files, options, progress, training, every job’s results', async () => {
  const { page } = app;
  if ((await page.locator('#files tbody tr').count()) === 0) {
    await page.click('#load-example-2');
    await waitForChecks(page, 4);
  }
  if ((await page.locator('table.ranking').count()) === 0) await run(page, '#run-rank_systems');
  await page.click('.options summary');
  const found = [];
  const check = async (what) => {
    for (const cut of await page.evaluate(findCuts)) found.push(`${what}: ${cut}`);
  };

  // The progress area, on screen while a job runs (a million bootstrap resamples: a few
  // seconds). A width's check counts only if the progress area was showing when the page
  // was measured (one synchronous evaluate); if the job had already finished, run it again.
  const resamples = await page.inputValue('#opt-resamples');
  await page.fill('#opt-resamples', '1000000');
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 });
    let measured = null;
    for (let attempt = 0; attempt < 4 && !measured; attempt++) {
      if (!(await page.evaluate(() => Boolean(window.medrank.state.running)))) {
        await page.click('#run-rank_systems');
        await page.waitForSelector('#progress:not([hidden])');
      }
      // Measured at the end of the page, where body.running leaves the docked area its room:
      // elsewhere it covers whatever the window's bottom shows, which moves with every row
      // the files table or the page's text gains.
      const m = await page.evaluate(
        `(() => { scrollTo(0, document.documentElement.scrollHeight); return { showing: !document.querySelector('#progress').hidden, cuts: (${findCuts})() }; })()`,
      );
      if (m.showing) measured = m.cuts;
    }
    assert.ok(measured, `the progress area was measured at ${width} px`);
    for (const cut of measured) found.push(`${width} px, while a job runs: ${cut}`);
    await page
      .locator('section[aria-labelledby=run-h]')
      .screenshot({ path: join(ARTIFACTS, `layout-${width}-progress.png`) })
      .catch(() => {}); // the job may end while the picture is taken
  }
  await page.waitForFunction(() => !window.medrank.state.running, null, { timeout: 120000 });
  assert.equal(await page.isVisible('#run-error'), false, 'the long job finished without an error');
  await page.fill('#opt-resamples', resamples);

  const tabs = await page.locator('#tabs [role=tab]').allTextContents();
  assert.ok(tabs.length >= 6, `the ranking's views: ${tabs}`);
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 });
    for (const [i, title] of tabs.entries()) {
      await page.click(`#tabs [role=tab] >> nth=${i}`);
      await check(`${width} px, tab “${title}”`);
    }
    await page.click('#tabs [role=tab] >> nth=0');
    await screenshot(page, `layout-${width}`);
    // Stacked into cards below 900 px, the files table is still a table to a screen reader.
    const files = await page.locator('#files').ariaSnapshot();
    assert.match(files, /^- table "Files added/, `${width} px`);
    assert.match(files, /columnheader "Kind"/, `${width} px`);
    assert.match(files, /cell "Argument bundle":\s*- combobox "Kind of bundle\.jsonl"/, `${width} px`);
  }
  // The other jobs' views too (each runs in well under a second on the example).
  for (const [button, job, files] of [
    ['#run-nrp', 'NRP'],
    ['#run-metrics', 'Metrics'],
    ['#run-rubric', 'Rubric'],
    ['#run-rubric_agreement', 'Agreement'],
    // The draft example's files are not in the one-click example (its formulary would be a
    // second documents file for NRP): added for the Draft job, the last one measured.
    ['#run-draft', 'Draft', ['draft/prompts.jsonl', 'draft/guideline.md', 'draft/formulary.tsv']],
  ]) {
    if (files) await upload(page, files);
    await run(page, button);
    const titles = await page.locator('#tabs [role=tab]').allTextContents();
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });
      for (const [i, title] of titles.entries()) {
        await page.click(`#tabs [role=tab] >> nth=${i}`);
        await check(`${width} px, ${job} tab “${title}”`);
      }
    }
  }
  assert.deepEqual(found, []);
});

const haveModel = existsSync(join(SITE, 'models/all-MiniLM-L6-v2/model.safetensors'));

test(
  'at 768 px the per-evaluator rank tables of an evaluator trained in the page stay inside their card (issue 47, item 10)',
  { skip: !haveModel && 'no bundled model: run scripts/setup.sh model, then scripts/build-web.sh' },
  async () => {
    const { page } = app;
    await page.setViewportSize({ width: 1280, height: 900 });
    // A small misinformation evaluator (one epoch on the fixture bundle): its name, the
    // task, the argument and the date, is what made the rank tables too wide.
    const trained = await pageTrain(
      page,
      {
        file: join(ROOT, 'tests/fixtures/train_misinfo/bundle.jsonl'),
        task: 'misinformation',
        arguments: 'system:expert',
        settings: { epochs: 1, lr: 0.01, batch: 8, patience: 1, seed: 3, split: 0.25 },
      },
      '',
    );
    const name = trained.stored.name;
    assert.match(name, /^misinformation-expert-head-\d{4}-\d\d-\d\dT\d\d:\d\d$/);
    await page.check(`input[name=model][value="trained:${trained.stored.id}"]`);
    await page.evaluate(() => {
      window.medrank.state.files = [];
    });
    await upload(page, ['bundle.jsonl', 'rankings.csv', 'corpus.jsonl']);
    // Every control (the corpus gives ir_passages): eight systems beside the evaluator's
    // name in each rank table.
    await setOptions(page, { controls: 'all' });
    await run(page, '#run-rank_systems');
    await page.setViewportSize({ width: 768, height: 900 });
    const titles = await page.locator('#tabs [role=tab]').allTextContents();
    const found = [];
    for (const [i, title] of titles.entries()) {
      await page.click(`#tabs [role=tab] >> nth=${i}`);
      // The tab itself never scrolls sideways: what is wider scrolls in its own box.
      const panel = await page.$eval('[role=tabpanel]:not([hidden])', (p) => [p.scrollWidth, p.clientWidth]);
      if (panel[0] > panel[1] + 1) found.push(`tab “${title}” is ${panel[0]} px wide in its ${panel[1]} px card`);
      for (const cut of await page.evaluate(findCuts)) found.push(`tab “${title}”: ${cut}`);
    }
    assert.deepEqual(found, []);
    // The per-evaluator rank table (the heatmap's): the evaluator's row under its name,
    // every system a column, scrolling in its own box that the keyboard reaches.
    await page.click('#tabs [role=tab]:text-is("Tables & export")');
    const block = page.locator('.table-block[data-table="heatmap_misinformation"]');
    assert.deepEqual(await block.locator('thead th').allTextContents(), [
      'evaluator',
      'expert',
      'gpt-4o',
      'llama-3-70b',
      'openbiollm-70b',
      'no_argument',
      'label_only',
      'noise',
      'ir_passages',
    ]);
    assert.equal(await block.locator('tbody tr td').first().textContent(), name);
    const box = await block.locator('.table-scroll').evaluate((b) => ({
      label: b.getAttribute('aria-label'),
      tabIndex: b.tabIndex,
      overflow: getComputedStyle(b).overflowX,
      scrolls: b.scrollWidth > b.clientWidth,
      fits: b.getBoundingClientRect().right <= b.closest('section.card').getBoundingClientRect().right,
    }));
    assert.deepEqual(box, { label: 'Rank of each system per evaluator — misinformation (1 = best; control cases last)', tabIndex: 0, overflow: 'auto', scrolls: true, fits: true });
    await screenshot(page, 'layout-768-trained-tables');
  },
);
