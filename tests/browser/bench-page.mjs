// The page's benchmarks in headless Chromium, driven like a user would: bench.html's encoder
// grid and workload on the threaded build the page picks (medrank serve: cross-origin
// isolated, N threads; relaxed SIMD in Chromium), on the threaded build without relaxed SIMD
// (`bench.html?simd=plain`), and on the single-threaded build (Options: 1 thread), and WebGPU
// on SwiftShader (smallest cell, for correctness only). Writes one JSON file with the page's
// figures and, when a native `medrank bench --json` file is given, the page / native ratios
// at the same thread count. A benchmark: it prints figures and asserts nothing about speed.
//
//   node bench-page.mjs OUT.json [NATIVE.json] [--grid full|small] [--no-gpu] [--no-workload]
//                       [--builds threaded,plain,single] [--model DIR] [--no-int8]
//
// --model DIR times that model folder (picked on bench.html as a user picks one) instead of
// the bundled model; the ONNX Runtime Web peer and the workload (both the bundled model's)
// are left out then. --no-int8: the CPU in f32 only.
import { writeFileSync, readFileSync } from 'node:fs';
import { openApp } from './harness.mjs';

const args = process.argv.slice(2);
const out = args[0];
const native = args[1] && !args[1].startsWith('--') ? JSON.parse(readFileSync(args[1], 'utf8')) : null;
const grid = args.includes('--grid') ? args[args.indexOf('--grid') + 1] : 'full';
const gpu = !args.includes('--no-gpu');
const workload = !args.includes('--no-workload');
const builds = (args.includes('--builds') ? args[args.indexOf('--builds') + 1] : 'threaded,plain,single').split(',');
const model = args.includes('--model') ? args[args.indexOf('--model') + 1] : null;
const int8 = !args.includes('--no-int8');
if (!out) {
  console.error(
    'usage: node bench-page.mjs OUT.json [NATIVE.json] [--grid full|small] [--no-gpu] [--no-workload] [--builds threaded,plain,single] [--model DIR] [--no-int8]',
  );
  process.exit(2);
}

/** Opens bench.html with `threads` (null = the default) and returns {engine, grid, workload};
 *  `plain`: the threaded build without relaxed SIMD. */
async function measure(threads, { webgpu, plain = false }) {
  const app = await openApp({ webgpu });
  try {
    const { page } = app;
    await page.evaluate(
      (n) => (n ? localStorage.setItem('medrank-threads', String(n)) : localStorage.removeItem('medrank-threads')),
      threads,
    );
    await page.goto(new URL(plain ? 'bench.html?simd=plain' : 'bench.html', app.server.url).href);
    await page.waitForFunction(() => document.querySelector('#bench-engine').textContent.length > 0, null, {
      timeout: 60000,
    });
    const engine = await page.textContent('#bench-engine');
    console.error(`[bench-page] ${engine}`);
    const result = {};
    await page.selectOption('#bench-grid', grid);
    await page.setChecked('#bench-cpu', true);
    await page.setChecked('#bench-gpu', webgpu);
    await page.setChecked('#bench-int8', int8);
    if (model) await page.setInputFiles('#bench-model', model);
    const peer = !model && !(await page.isDisabled('#bench-peer'));
    if (peer) await page.setChecked('#bench-peer', true);
    result.grid = await runAndRead(page, '#bench-run', '#bench-progress', '#bench-error', async () => {
      // With the peer, the grid is done once onnxruntime-web's rows are in too.
      if (peer)
        await page.waitForFunction(() => (window.__benchLast || []).some((b) => b.backend === 'ort-web'), null, {
          timeout: 3600000,
        });
      return page.evaluate(() => window.__benchLast);
    });
    if (!webgpu && workload && !model) {
      await page.setChecked('#workload-cpu', true);
      await page.setChecked('#workload-int8', true);
      await page.setChecked('#workload-gpu', false);
      result.workload = await runAndRead(page, '#workload-run', '#workload-progress', '#workload-error', () =>
        page.evaluate(() => window.__workloadLast),
      );
    }
    return { engine, ...result };
  } finally {
    await app.close();
  }
}

async function runAndRead(page, button, progress, error, read) {
  await page.click(button);
  await page.waitForFunction(
    ([p, e]) => /Done/.test(document.querySelector(p).textContent) || !document.querySelector(e).hidden,
    [progress, error],
    { timeout: 3600000 },
  );
  const message = await page.$eval(error, (e) => (e.hidden ? null : e.textContent));
  if (message) throw new Error(`the page reported: ${message}`);
  return read();
}

/** The page / native ratio per cell (tokens/s) and for the workload (sequences/s). */
function ratios(page) {
  if (!native) return null;
  const cpu = page.grid.find((b) => b.backend === 'wasm-cpu');
  const cpu8 = page.grid.find((b) => b.backend === 'wasm-cpu-int8');
  // Native rows of one precision (reports before int8 have no precision field: f32).
  const nativeRow = (r, precision) =>
    native.encoder?.ours?.find(
      (o) => o.seq_len === r.seq_len && o.batch === r.batch && (o.precision ?? 'f32') === precision,
    );
  const cells = (cpu?.rows || []).map((r) => {
    const n = nativeRow(r, 'f32');
    const p8 = cpu8?.rows?.find((o) => o.seq_len === r.seq_len && o.batch === r.batch);
    const n8 = nativeRow(r, 'int8');
    return {
      seq_len: r.seq_len,
      batch: r.batch,
      page_tokens_per_s: r.tokens_per_s,
      native_tokens_per_s: n?.tokens_per_s ?? null,
      ratio: n ? r.tokens_per_s / n.tokens_per_s : null,
      page_int8_tokens_per_s: p8?.tokens_per_s ?? null,
      page_int8_over_f32: p8 ? p8.tokens_per_s / r.tokens_per_s : null,
      native_int8_tokens_per_s: n8?.tokens_per_s ?? null,
      int8_ratio: p8 && n8 ? p8.tokens_per_s / n8.tokens_per_s : null,
    };
  });
  const ort = page.grid.find((b) => b.backend === 'ort-web');
  // Per step of the CPU path (`medrank bench --parts profile`): page / native time.
  for (const c of cells) {
    const pageSteps = cpu.rows.find((r) => r.seq_len === c.seq_len && r.batch === c.batch)?.steps || [];
    const nativeSteps = native.profile?.find((r) => r.seq_len === c.seq_len && r.batch === c.batch)?.steps || [];
    c.steps = pageSteps.map((s) => {
      const n = nativeSteps.find((x) => x.step === s.step);
      return {
        step: s.step,
        page_ms: s.seconds * 1e3,
        native_ms: n ? n.seconds * 1e3 : null,
        page_over_native: n?.seconds ? s.seconds / n.seconds : null,
      };
    });
  }
  for (const c of cells) {
    const o = ort?.rows?.find((r) => r.seq_len === c.seq_len && r.batch === c.batch);
    c.ort_web_tokens_per_s = o?.tokens_per_s ?? null;
    c.ratio_to_ort_web = o ? c.page_tokens_per_s / o.tokens_per_s : null;
  }
  const cpuWorkload = (rows, precision) =>
    rows?.find((x) => x.backend === 'cpu' && (x.precision ?? 'f32') === precision);
  const w = cpuWorkload(page.workload, 'f32');
  const nw = cpuWorkload(native.workload, 'f32');
  const w8 = cpuWorkload(page.workload, 'int8');
  const nw8 = cpuWorkload(native.workload, 'int8');
  return {
    native_threads: native.encoder?.threads ?? null,
    page_threads: cpu?.threads ?? null,
    ort_web: ort ? { device: ort.device, threads: ort.threads, error: ort.error ?? null } : null,
    cells,
    workload:
      w && nw
        ? {
            page_sequences_per_s: w.sequences_per_s,
            native_sequences_per_s: nw.sequences_per_s,
            native_threads: nw.threads,
            ratio: w.sequences_per_s / nw.sequences_per_s,
            page_int8_sequences_per_s: w8?.sequences_per_s ?? null,
            page_int8_over_f32: w8 ? w8.sequences_per_s / w.sequences_per_s : null,
            native_int8_sequences_per_s: nw8?.sequences_per_s ?? null,
            int8_ratio: w8 && nw8 ? w8.sequences_per_s / nw8.sequences_per_s : null,
          }
        : null,
  };
}

const report = { date: new Date().toISOString(), browser: 'Debian Chromium (headless)' };
for (const [name, threads, plain] of [
  ['threaded', null, false],
  ['plain', null, true],
  ['single', 1, false],
]) {
  if (!builds.includes(name)) continue;
  const run = await measure(threads, { webgpu: false, plain });
  report[name === 'plain' ? 'threaded_plain' : name] = { ...run, vs_native: ratios(run) };
}
if (gpu) report.webgpu_swiftshader = await measureGpu();
writeFileSync(out, JSON.stringify(report, null, 2));
console.error(`[bench-page] wrote ${out}`);

async function measureGpu() {
  // SwiftShader is a CPU emulation of a GPU: the smallest cell only, as a correctness check
  // that WebGPU runs, never a speed figure.
  const app = await openApp({ webgpu: true });
  try {
    const { page } = app;
    await page.goto(new URL('bench.html', app.server.url).href);
    await page.selectOption('#bench-grid', 'small');
    await page.setChecked('#bench-cpu', false);
    await page.setChecked('#bench-gpu', true);
    return await runAndRead(page, '#bench-run', '#bench-progress', '#bench-error', () =>
      page.evaluate(() => window.__benchLast),
    );
  } finally {
    await app.close();
  }
}
