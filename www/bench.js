// The encoder benchmark page: asks the worker (the same wasm engine as the app) to time the
// bundled model on the WebAssembly CPU (in f32 and int8) and on WebGPU, and shows the figures side by side,
// with the wasm CPU as a ratio of a pasted native `medrank bench --json` when given.
import { registerServiceWorker, describeThreads, workerUrl } from './isolation.js';

const $ = (sel) => document.querySelector(sel);
const GRID = { full: [128, 256, 512].flatMap((l) => [1, 8, 32].map((b) => [l, b])), small: [[128, 1]] };
let last = null; // the latest result, re-rendered when native figures arrive

// The same worker as the app, so the same build choice (threaded when this page is
// cross-origin isolated) and the same thread count (the app's Options).
// `bench.html?simd=plain` runs the threaded build without relaxed SIMD (to measure what it adds).
const worker = new Worker(workerUrl(import.meta.url), { type: 'module' });
let engine = null;
const ready = new Promise((resolve, reject) => {
  worker.addEventListener('message', (e) => {
    if (e.data.type === 'ready') {
      engine = e.data;
      $('#bench-engine').textContent =
        `Engine: ${describeThreads(engine)}${engine.threadedBuild ? ' (threaded build)' : ''}, SIMD: ${engine.simd}.`;
      resolve();
    }
    if (e.data.type === 'fatal') reject(new Error(e.data.error.message));
  });
});
registerServiceWorker();

let lastId = 0;
/** Sends one job to the worker; `onDone(result)` or the page's error box. */
function ask(message, onDone, { button, progress, error }) {
  button.disabled = true;
  error.hidden = true;
  progress.textContent = 'Starting…';
  const id = ++lastId;
  const onMessage = (e) => {
    const msg = e.data;
    if (msg.id !== id) return;
    if (msg.type === 'progress') {
      progress.textContent = `${msg.stage} (${msg.done} / ${msg.total})`;
      return;
    }
    worker.removeEventListener('message', onMessage);
    button.disabled = false;
    if (msg.type === 'error') {
      error.textContent = msg.error.message;
      error.hidden = false;
      progress.textContent = '';
      return;
    }
    progress.textContent = 'Done.';
    onDone(msg.result);
  };
  worker.addEventListener('message', onMessage);
  ready.then(() => worker.postMessage({ ...message, id }));
}

function run() {
  const backends = [...($('#bench-cpu').checked ? ['cpu'] : []), ...($('#bench-gpu').checked ? ['gpu'] : [])];
  if (!backends.length) return;
  // f32, and int8 beside it (the CPU only: the GPU path is f32).
  const precisions = $('#bench-int8').checked ? ['f32', 'int8'] : ['f32'];
  const message = { type: 'bench', backends, precisions, cells: GRID[$('#bench-grid').value], minSeconds: 1.0 };
  // A picked folder is timed instead of the bundled model (the peer's graph is the bundled
  // model's, so it is left out then).
  const folder = [...$('#bench-model').files];
  if (folder.length)
    message.model = { source: 'local', files: folder, label: folder[0].webkitRelativePath.split('/')[0] };
  ask(
    message,
    (result) => {
      last = result;
      window.__benchLast = result; // for scripts/bench-page.sh
      render();
      if ($('#bench-peer').checked && !$('#bench-peer').disabled && !message.model) runPeer(message.cells);
    },
    { button: $('#bench-run'), progress: $('#bench-progress'), error: $('#bench-error') },
  );
}

/** onnxruntime-web on the same cells with medrank's thread count (bench builds only). */
function runPeer(cells) {
  const peer = new Worker(new URL('./bench-peer.js', import.meta.url), { type: 'module' });
  $('#bench-run').disabled = true;
  peer.onmessage = (e) => {
    const msg = e.data;
    if (msg.type === 'progress') {
      $('#bench-progress').textContent = `${msg.stage} (${msg.done} / ${msg.total})`;
      return;
    }
    peer.terminate();
    $('#bench-run').disabled = false;
    // The f32 graph, and the int8 graph when the bench build has it.
    const entries =
      msg.type === 'result'
        ? [
            { backend: 'ort-web', ...msg.result },
            ...(msg.int8 ? [{ backend: 'ort-web-int8', precision: 'int8', ...msg.int8 }] : []),
          ]
        : [{ backend: 'ort-web', device: '', threads: 0, rows: [], error: msg.error.message }];
    last = [...last.filter((b) => !b.backend.startsWith('ort-web')), ...entries];
    window.__benchLast = last;
    $('#bench-progress').textContent = 'Done (with the peer).';
    render();
  };
  peer.postMessage({
    type: 'bench',
    id: 1,
    cells,
    threads: engine?.threads || 1,
    minSeconds: 1.0,
    int8: $('#bench-int8').checked,
  });
}

// The peer is there only in a bench build (scripts/build-web.sh --bench-peer).
fetch('peer/ort/ort.wasm.min.mjs', { method: 'HEAD' })
  .then((r) => {
    $('#bench-peer').disabled = !r.ok;
    $('#bench-peer').checked = r.ok;
    $('#bench-peer-note').hidden = r.ok;
  })
  .catch(() => {});

/** The GPU trainer's gradients against the reference autograd on this browser's adapter. */
function runGradientCheck() {
  ask(
    { type: 'gradient-check' },
    (result) => {
      window.__gradientCheck = result; // for the browser tests
      const failed = result.checks.filter((c) => !c.ok);
      const worst = Math.max(...result.checks.filter((c) => !c.zero_by_construction).map((c) => c.difference));
      $('#gradcheck-summary').textContent =
        `${result.adapter.name}: ${result.checks.length - failed.length} of ${result.checks.length} checks within ` +
        `the limit; the largest relative difference is ${worst.toExponential(1)}.`;
      const body = $('#gradcheck-table tbody');
      body.replaceChildren();
      // The failures first, then the ten largest differences.
      const shown = [
        ...failed,
        ...result.checks
          .filter((c) => c.ok)
          .sort((a, b) => b.difference - a.difference)
          .slice(0, 10),
      ];
      for (const c of shown) {
        const tr = document.createElement('tr');
        for (const [text, cls] of [
          [c.case, ''],
          [c.tensor, ''],
          [
            c.zero_by_construction
              ? `${c.difference.toExponential(1)} (no gradient by construction)`
              : c.difference.toExponential(2),
            'num',
          ],
          [c.ok ? 'yes' : 'NO', ''],
        ]) {
          const td = document.createElement('td');
          td.textContent = text;
          td.className = cls;
          tr.append(td);
        }
        body.append(tr);
      }
    },
    { button: $('#gradcheck-run'), progress: $('#gradcheck-progress'), error: $('#gradcheck-error') },
  );
}

/** This build's int8 kernels against the plain formula (`self_check('int8')`). */
function runInt8Check() {
  ask(
    { type: 'int8-check' },
    (result) => {
      window.__int8Check = { ...result, engine }; // for the browser tests
      $('#int8check-summary').textContent =
        `SIMD ${engine.simd}${engine.threadedBuild ? ', threaded build' : ''}: ` +
        `${result.kernels.join(', ')} equal the formula on every shape.`;
    },
    { button: $('#int8check-run'), progress: $('#int8check-progress'), error: $('#int8check-error') },
  );
}

/** The workload: `evaluate` on the CasiMedicos dev bundle, end to end, per backend. */
function runWorkload() {
  const backends = [
    ...($('#workload-cpu').checked ? ['cpu'] : []),
    ...($('#workload-int8').checked ? ['cpu-int8'] : []),
    ...($('#workload-gpu').checked ? ['gpu'] : []),
  ];
  if (!backends.length) return;
  ask(
    { type: 'workload', backends },
    (results) => {
      lastWorkload = results;
      window.__workloadLast = results; // for scripts/bench-page.sh
      renderWorkload();
    },
    { button: $('#workload-run'), progress: $('#workload-progress'), error: $('#workload-error') },
  );
}

let lastWorkload = null;
function renderWorkload() {
  if (!lastWorkload) return;
  const body = $('#workload-table tbody');
  body.replaceChildren();
  for (const w of lastWorkload) {
    const native = nativeWorkload(w.precision ?? 'f32');
    const ratio =
      w.backend === 'cpu' && native
        ? `${(w.sequences_per_s / native.sequences_per_s).toFixed(2)} (native: ${native.threads} thread${native.threads === 1 ? '' : 's'})`
        : '—';
    const name = w.precision === 'int8' ? `${w.backend} (int8)` : w.backend;
    const values = w.error
      ? [w.backend, `not run: ${w.error}`, '', '', '', '', '', '']
      : [
          name,
          w.device,
          w.threads,
          w.sequences,
          w.seconds.toFixed(1),
          w.sequences_per_s.toFixed(1),
          w.accuracy === null ? 'n/a' : w.accuracy.toFixed(4),
          ratio,
        ];
    const tr = document.createElement('tr');
    tr.dataset.backend = w.backend;
    for (const v of values) {
      const td = document.createElement('td');
      td.textContent = String(v);
      tr.append(td);
    }
    body.append(tr);
  }
}

/** The native CPU workload row of a precision in a pasted `medrank bench --parts workload
 *  --json` file (rows before int8 have no precision: f32). */
function nativeWorkload(precision) {
  try {
    const rows = JSON.parse($('#native-json').value)?.workload || [];
    return rows.find((w) => w.backend === 'cpu' && (w.precision ?? 'f32') === precision) || null;
  } catch {
    return null;
  }
}

/** Step seconds per "length x batch" from `medrank bench --parts profile --json`. */
function nativeSteps() {
  try {
    const rows = JSON.parse($('#native-json').value)?.profile || [];
    return new Map(rows.map((r) => [`${r.seq_len}x${r.batch}`, r.steps]));
  } catch {
    return new Map();
  }
}

/** A table's head and body, emptied (made when the page has none yet). */
function emptied(selector) {
  const table = $(selector);
  const head = table.createTHead();
  const body = table.tBodies[0] ?? table.createTBody();
  head.replaceChildren();
  body.replaceChildren();
  return [head, body];
}

/** The page's time per step of the CPU path, and the native / page ratio per step when known. */
function renderProfile(cpu) {
  const rows = (cpu?.rows || []).filter((r) => r.steps?.length);
  const [head, body] = emptied('#profile-table');
  if (!rows.length) return;
  const native = nativeSteps();
  const cell = (tag, text, cls) =>
    Object.assign(document.createElement(tag), { textContent: text, className: cls || '' });
  const htr = document.createElement('tr');
  for (const h of ['length', 'batch', ...rows[0].steps.map((s) => `${s.step} ms`)]) htr.append(cell('th', h, 'num'));
  head.append(htr);
  for (const r of rows) {
    const key = `${r.seq_len}x${r.batch}`;
    const tr = document.createElement('tr');
    tr.dataset.cell = key;
    tr.append(cell('td', String(r.seq_len), 'num'), cell('td', String(r.batch), 'num'));
    for (const s of r.steps) {
      const n = native.get(key)?.find((x) => x.step === s.step);
      const ratio = n && n.seconds > 0 ? ` (${(s.seconds / n.seconds).toFixed(1)}×)` : '';
      tr.append(cell('td', `${(s.seconds * 1e3).toFixed(2)}${ratio}`, 'num'));
    }
    body.append(tr);
  }
}

/** The WebGPU encoder's GPU time per step (timestamp queries), or why there is none. */
function renderGpuProfile(gpu) {
  const [head, body] = emptied('#gpu-profile-table');
  const note = $('#gpu-profile-note');
  note.textContent = gpu?.gpu_profile_note || '';
  note.hidden = !gpu?.gpu_profile_note;
  const rows = gpu?.gpu_profile || [];
  if (!rows.length) return;
  const cell = (tag, text, cls) =>
    Object.assign(document.createElement(tag), { textContent: text, className: cls || '' });
  const ms = (seconds) => (seconds * 1e3).toFixed(2);
  const steps = rows[0].profile.steps.map((s) => s.step);
  const htr = document.createElement('tr');
  for (const h of ['length', 'batch', ...steps.map((s) => `${s} ms`), 'GPU total ms', 'read-back ms'])
    htr.append(cell('th', h, 'num'));
  head.append(htr);
  for (const r of rows) {
    const tr = document.createElement('tr');
    tr.dataset.cell = `${r.seq_len}x${r.batch}`;
    tr.append(cell('td', String(r.seq_len), 'num'), cell('td', String(r.batch), 'num'));
    for (const step of steps) {
      const s = r.profile.steps.find((x) => x.step === step);
      tr.append(cell('td', s ? ms(s.seconds) : '–', 'num'));
    }
    const total = r.profile.steps.reduce((sum, s) => sum + s.seconds, 0);
    tr.append(cell('td', ms(total), 'num'), cell('td', ms(r.profile.readback_seconds), 'num'));
    body.append(tr);
  }
}

/** tokens/s per "length x batch" from `medrank bench --json` (its encoder.ours rows). */
function nativeFigures() {
  try {
    const report = JSON.parse($('#native-json').value);
    // The f32 rows (reports before int8 have no precision field): the page's f32 grid's peer.
    const rows = (report?.encoder?.ours || []).filter((r) => (r.precision ?? 'f32') === 'f32');
    return new Map(rows.map((r) => [`${r.seq_len}x${r.batch}`, r.tokens_per_s]));
  } catch {
    return new Map();
  }
}

function render() {
  if (!last) return;
  const by = Object.fromEntries(last.map((b) => [b.backend, b]));
  const cpu = by['wasm-cpu'];
  const cpu8 = by['wasm-cpu-int8'];
  const gpu = by.webgpu;
  const native = nativeFigures();
  renderProfile(cpu);
  renderGpuProfile(gpu);
  const describe = (b, name) => (b ? (b.error ? `${name}: not available (${b.error})` : `${name}: ${b.device}`) : null);
  const peer = by['ort-web'];
  const peer8 = by['ort-web-int8'];
  $('#bench-devices').textContent = [
    describe(cpu, 'CPU'),
    describe(cpu8, 'CPU int8'),
    describe(gpu, 'WebGPU'),
    describe(peer, `Peer (${peer?.threads} thread${peer?.threads === 1 ? '' : 's'})`),
    describe(peer8, 'Peer int8'),
  ]
    .filter(Boolean)
    .join(' · ');
  const cells = new Map();
  for (const b of last)
    for (const r of b.rows) {
      const key = `${r.seq_len}x${r.batch}`;
      cells.set(key, { ...(cells.get(key) || { seq_len: r.seq_len, batch: r.batch }), [b.backend]: r });
    }
  const fmt = (x, digits) => (x === undefined ? '—' : x.toLocaleString(undefined, { maximumFractionDigits: digits }));
  const body = $('#bench-table tbody');
  body.replaceChildren();
  for (const [key, c] of cells) {
    const c1 = c['wasm-cpu'];
    const q1 = c['wasm-cpu-int8'];
    const o8 = c['ort-web-int8'];
    const g1 = c.webgpu;
    const values = [
      c.seq_len,
      c.batch,
      fmt(c1?.sequences_per_s, 2),
      fmt(c1?.tokens_per_s, 0),
      fmt(g1?.sequences_per_s, 2),
      fmt(g1?.tokens_per_s, 0),
      c1 && g1 ? `${(g1.tokens_per_s / c1.tokens_per_s).toFixed(2)}×` : '—',
      c1 && native.has(key) ? `${(c1.tokens_per_s / native.get(key)).toFixed(2)}` : '—',
      fmt(c['ort-web']?.tokens_per_s, 0),
      c1 && c['ort-web'] ? `${(c1.tokens_per_s / c['ort-web'].tokens_per_s).toFixed(2)}` : '—',
      fmt(q1?.tokens_per_s, 0),
      c1 && q1 ? `${(q1.tokens_per_s / c1.tokens_per_s).toFixed(2)}×` : '—',
      fmt(o8?.tokens_per_s, 0),
      q1 && o8 ? `${(q1.tokens_per_s / o8.tokens_per_s).toFixed(2)}` : '—',
    ];
    const tr = document.createElement('tr');
    tr.dataset.cell = key;
    for (const v of values) {
      const td = document.createElement('td');
      td.className = 'num';
      td.textContent = String(v);
      tr.append(td);
    }
    body.append(tr);
  }
}

$('#bench-run').addEventListener('click', run);
$('#workload-run').addEventListener('click', runWorkload);
$('#gradcheck-run').addEventListener('click', runGradientCheck);
$('#int8check-run').addEventListener('click', runInt8Check);
$('#native-json').addEventListener('input', () => {
  render();
  renderWorkload();
});
$('#native-file').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (file) $('#native-json').value = await file.text();
  render();
  renderWorkload();
});
