// The time-left estimate's error on real runs of the page (issue 47), in headless Chromium:
// the page ranks a long bundle (the example's MCQA questions copied, no controls) on the CPU
// with the bundled model, and every progress report is recorded (its time, the share of the
// work done, the stage text). Printed: at 10 %, 30 % and 60 % of the work, the time left the
// page said against the time the run then took, and whether the estimate ever rose. Written:
// OUT.json with each run's recording; its `marks` (seconds since the first batch began, work
// done in parts per million) are what tests/fixtures/time_left/ holds for the estimate's unit
// test (tests/integration/model_backend.rs), which replays them through the same Rust code.
// A benchmark: it prints figures and asserts nothing about speed.
//
//   node bench-estimate.mjs OUT.json [--copies 20] [--runs 2]
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { openApp, scaledUpBundle, setUpLongRun } from './harness.mjs';

const args = process.argv.slice(2);
const out = args[0];
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const copies = option('--copies', 20);
const runs = option('--runs', 2);
if (!out || out.startsWith('--')) {
  console.error('usage: node bench-estimate.mjs OUT.json [--copies 20] [--runs 2]');
  process.exit(2);
}

/** "about 1 min 09 s left" -> 69 (report::fmt_duration's forms); null without one. */
function secondsIn(text) {
  const m = text.match(/about (?:(\d+) h )?(?:(\d+) min )?(?:(\d+) s)? left$/);
  return m ? Number(m[1] || 0) * 3600 + Number(m[2] || 0) * 60 + Number(m[3] || 0) : null;
}

/** One run on a fresh page: the stage reports of the encoding, timed. */
async function record(bundle) {
  const app = await openApp();
  try {
    const { page } = app;
    await setUpLongRun(page, bundle);
    const engine = await page.evaluate(() => {
      const { threads, threadedBuild, simd } = window.medrank.state.engine;
      return { threads, threadedBuild, simd };
    });
    await page.evaluate(() => {
      window.__stages = [];
      const stage = document.querySelector('#progress-stage');
      const bar = document.querySelector('#progress-bar');
      new MutationObserver(() =>
        window.__stages.push({ t: performance.now(), text: stage.textContent, done: bar.value, total: bar.max }),
      ).observe(stage, { childList: true, characterData: true, subtree: true });
    });
    await page.click('#run-rank_systems');
    await page.waitForFunction(() => !window.medrank.state.running, null, { timeout: 3600000 });
    const error = await page.$eval('#run-error', (e) => (e.hidden ? null : e.textContent));
    if (error) throw new Error(`the page reported: ${error}`);
    const stages = (await page.evaluate(() => window.__stages)).filter(
      (s) => s.text.startsWith('Encoding with the model') && s.text.includes('tokens)'),
    );
    return { engine, stages };
  } finally {
    await app.close();
  }
}

function summarise({ stages }) {
  // The encoding begins at the last report with nothing done (after the tokenizing).
  const begin = stages.findLast((s) => s.done === 0);
  const end = stages.at(-1);
  const batches = stages.filter((s) => s.t >= begin.t);
  const at = [0.1, 0.3, 0.6].map((share) => {
    const s = batches.find((b) => b.done >= share * b.total && secondsIn(b.text) !== null);
    const said = secondsIn(s.text);
    const took = (end.t - s.t) / 1000;
    return { share, done: s.done / s.total, said, took, error: (said - took) / took, text: s.text };
  });
  let rises = 0;
  let last = null;
  for (const s of batches) {
    const said = secondsIn(s.text);
    if (said === null) continue;
    // fmt_duration shows whole seconds: a rise is a later estimate above the earlier one.
    if (last !== null && said > last) rises += 1;
    last = said;
  }
  return {
    seconds: (end.t - begin.t) / 1000,
    at,
    rises,
    marks: batches.map((s) => [Number(((s.t - begin.t) / 1000).toFixed(3)), s.done]),
  };
}

const bundle = scaledUpBundle(copies);
const results = [];
for (let r = 0; r < runs; r++) {
  const recorded = await record(bundle);
  const summary = summarise(recorded);
  results.push({ engine: recorded.engine, ...summary });
  console.log(`run ${r + 1}: ${summary.seconds.toFixed(1)} s of encoding on ${JSON.stringify(recorded.engine)}`);
  for (const a of summary.at)
    console.log(
      `  at ${(100 * a.done).toFixed(1)} %: said ${a.said} s, took ${a.took.toFixed(1)} s (${a.error >= 0 ? '+' : ''}${(100 * a.error).toFixed(0)} %)`,
    );
  console.log(`  the estimate rose ${summary.rises} time(s) over ${summary.marks.length} reports`);
}
writeFileSync(
  out,
  JSON.stringify({ date: new Date().toISOString(), cpus: cpus().length, cpu: cpus()[0]?.model, copies, runs: results }, null, 1),
);
console.log(`wrote ${out}`);
