// The page: files in, jobs out to the worker, results rendered. No framework; every heavy
// step runs in worker.js (the wasm build of the same library as the CLI).
import { renderResults, buildReportHtml } from './results.js';
import { el, download, formatError } from './dom.js';
import { wireTraining } from './train.js';
import { HUB_ACCESS, hubBytes } from './hub.js';
import {
  registerServiceWorker,
  describeThreads,
  threadsPhrase,
  chosenThreads,
  chooseThreads,
  workerUrl,
} from './isolation.js';

const $ = (sel) => document.querySelector(sel);
// The kinds of input file and the jobs, as the engine describes them when it is ready
// (page::describe): key -> {label, hint, params}; job name -> {label, title, accepts,
// required, model_replaces, model: none | optional | required, needs_model, views, defaults,
// check}. The page keeps no list of its own: the Run buttons and the Options' values come
// from here.
const KINDS = {};
const JOBS = {};
const state = {
  files: [], // {id, name, text, size, kind, params, check, importedFrom}
  reading: 0, // file drops whose files are still being read (not yet in `files`)
  nextId: 1,
  worker: null,
  workerReady: null,
  engine: null, // {version, jobs, sharedCancel, threads, threadedBuild, threadsWhy, simd}
  pending: new Map(), // message id -> {resolve, reject, onProgress}
  running: null, // {job, cancelBuffer}
  lastResult: null,
  rankCheck: null, // the engine's model-free check of the ranking: {status, result | error}
  optionsFilled: false, // the Options' fields were set to the engine's defaults
  // The last ranking in each precision per input set (files, options but the precision,
  // model): key -> {f32, int8}, each the reply's `ranking`.
  rankingsByPrecision: new Map(),
};

// ---------------------------------------------------------------- worker -----------------
function startWorker() {
  state.worker = new Worker(workerUrl(import.meta.url), { type: 'module' });
  state.workerReady = new Promise((resolve, reject) => {
    state.worker.onmessage = (event) => {
      const msg = event.data;
      if (msg.type === 'ready') {
        state.engine = msg;
        for (const kind of msg.kinds) KINDS[kind.key] = kind;
        for (const job of msg.jobs) JOBS[job.name] = job;
        renderRunButtons();
        // Once: a worker started again (another thread count) keeps what the user set.
        if (!state.optionsFilled) fillOptions();
        state.optionsFilled = true;
        renderHubSuggestions(msg.hub);
        $('#version').textContent = msg.version;
        $('#engine').textContent = `engine: wasm (Web Worker) · ${describeThreads(msg)}`;
        resolve(msg);
        return;
      }
      if (msg.type === 'fatal') {
        showRunError(msg.error);
        reject(new Error(msg.error.message));
        return;
      }
      const waiting = state.pending.get(msg.id);
      if (!waiting) return;
      if (msg.type === 'progress') {
        waiting.onProgress?.(msg);
      } else {
        state.pending.delete(msg.id);
        if (msg.type === 'error') waiting.reject(msg.error);
        else waiting.resolve(msg);
      }
    };
    state.worker.onerror = (event) => {
      const err = { message: `The engine stopped: ${event.message || 'unknown error'}` };
      showRunError(err);
      reject(new Error(err.message));
    };
  });
  state.workerReady.catch(() => {});
}

let messageCounter = 0;
async function ask(message, onProgress, transfer = []) {
  await state.workerReady;
  const id = ++messageCounter;
  return new Promise((resolve, reject) => {
    state.pending.set(id, { resolve, reject, onProgress });
    state.worker.postMessage({ ...message, id }, transfer);
  });
}

// ---------------------------------------------------------------- files ------------------
async function addFiles(fileList) {
  const added = [];
  // Until every dropped file is read and checked, no job may start: a click in between
  // would run on part of the files (say, a ranking without the people's rankings).
  state.reading++;
  updateRunButtons();
  try {
    for (const file of fileList) {
      let text;
      try {
        text = await file.text();
      } catch (error) {
        // Moved or deleted between the drop and its read: listed with why, and the other
        // files of the drop are read and checked as usual.
        const entry = addText(file.name, '');
        entry.size = file.size;
        entry.check = { status: 'bad', error: { message: `The file could not be read: ${error.message}` } };
        continue;
      }
      added.push(addText(file.name, text));
    }
  } finally {
    state.reading--;
    renderFiles();
  }
  await Promise.all(added.map(identifyAndCheck));
  announce(`${added.length} file${added.length === 1 ? '' : 's'} added`);
}

/** The engine's first guess of a file's kind and parameters from its name and first lines;
 *  with `kind` (the user's choice), that kind's default parameters. */
async function describeFile(name, text, kind = null) {
  const reply = await ask({ type: 'describe', name, text: text.slice(0, 1 << 20), kind });
  return reply.result;
}

/** Lists a file at once (its kind still unknown: the engine may be busy with a job);
 *  `importedFrom`: the file the engine imported it from (a HealthBench file). */
function addText(name, text, importedFrom = null) {
  const existing = state.files.findIndex((f) => f.name === name);
  const entry = {
    id: state.nextId++,
    name,
    text,
    size: new Blob([text]).size,
    kind: null,
    params: {},
    check: { status: 'pending' },
    importedFrom,
  };
  if (existing >= 0)
    state.files.splice(existing, 1, entry); // same name: the new one replaces it
  else state.files.push(entry);
  return entry;
}

/** A file a result hands the page (the Draft job's reviewed rubric), listed as if the
 *  user had added it: its kind the engine's guess, then its check. */
async function addResultFile(name, text) {
  const entry = addText(name, text);
  renderFiles();
  await identifyAndCheck(entry);
  announce(`${name} added to the files`);
  return entry;
}

/** The engine's guess of the file's kind, then its check. */
async function identifyAndCheck(entry) {
  try {
    const guess = await describeFile(entry.name, entry.text);
    entry.kind = guess.kind;
    entry.params = guess.params;
  } catch (error) {
    entry.check = { status: 'bad', error };
    renderFiles();
    return;
  }
  await checkFile(entry);
}

async function checkFile(entry) {
  entry.check = { status: 'pending' };
  renderFiles();
  if (!entry.kind) {
    entry.check = { status: 'bad', error: { message: 'medrank does not recognise this file: choose its kind.' } };
    renderFiles();
    return;
  }
  // The other files its import reads (a HealthBench eval file's completions).
  const companions = state.files
    .filter((f) => f !== entry && KINDS[entry.kind]?.reads_with.includes(f.kind))
    .map((f) => ({ name: f.name, text: f.text }));
  let imported = null;
  try {
    const reply = await ask({ type: 'check-file', file: { ...fileForEngine(entry), companions } });
    const r = reply.result;
    entry.check = { status: r.warnings.length ? 'warn' : 'ok', summary: r.summary, warnings: r.warnings };
    imported = r.imported ?? null;
  } catch (error) {
    entry.check = { status: 'bad', error };
  }
  renderFiles();
  await listImported(entry, imported);
  // A file another one's import reads: that one is imported again with it.
  const readers = state.files.filter((f) => f !== entry && KINDS[f.kind]?.reads_with.includes(entry.kind));
  await Promise.all(readers.map(checkFile));
  scheduleRankCheck();
}

/** The file the engine imported from `entry` (as `medrank import` writes it), listed under
 *  its own name and kind in place of what an earlier check of `entry` imported. */
async function listImported(entry, imported) {
  const before = state.files.filter((f) => f.importedFrom === entry.name && f.name !== imported?.name);
  state.files = state.files.filter((f) => !before.includes(f));
  if (!imported) {
    if (before.length) renderFiles();
    return;
  }
  const added = addText(imported.name, imported.text, entry.name);
  renderFiles();
  await identifyAndCheck(added);
}

/** What the engine receives for a file: its name, text, kind and the kind's parameters. */
function fileForEngine(f) {
  return { name: f.name, text: f.text, kind: f.kind, params: f.params || {} };
}

function renderFiles() {
  const tbody = $('#files tbody');
  tbody.replaceChildren();
  $('#files').hidden = state.files.length === 0;
  $('#files-empty').hidden = state.files.length > 0;
  for (const f of state.files) {
    const tr = el('tr', { 'data-file': f.name });
    const from = f.importedFrom ? `imported from ${f.importedFrom}, ` : '';
    tr.append(el('td', {}, f.name, el('div', { class: 'muted small' }, from + formatBytes(f.size))));
    // kind chooser
    const select = el('select', { 'aria-label': `Kind of ${f.name}` });
    select.append(el('option', { value: '' }, '— choose —'));
    for (const [key, kind] of Object.entries(KINDS)) {
      select.append(el('option', { value: key, ...(key === f.kind ? { selected: '' } : {}) }, kind.label));
    }
    select.addEventListener('change', async () => {
      f.kind = select.value || null;
      f.params = f.kind ? (await describeFile(f.name, f.text, f.kind)).params : {};
      checkFile(f);
    });
    tr.append(el('td', {}, select));
    // parameters of the kind (system name for a HiTZ file, dimension for qrels, ...)
    const paramsCell = el('td', {});
    for (const p of KINDS[f.kind]?.params || []) {
      const input = el('input', {
        type: 'text',
        value: f.params?.[p.key] ?? '',
        'aria-label': `${p.label} for ${f.name}`,
        size: 14,
      });
      input.addEventListener('change', () => {
        f.params = { ...f.params, [p.key]: input.value.trim() };
        checkFile(f);
      });
      paramsCell.append(el('label', { class: 'muted small' }, `${p.label} `, input), ' ');
    }
    if (f.kind === 'ros') {
      // A precomputed control file (the paper's Label_Only, Noise, IR_Passages): the
      // import marks it, as `medrank import --control-source NAME=FILE` does.
      const box = el('input', {
        type: 'checkbox',
        class: 'control-case',
        'aria-label': `control case: ${f.name}`,
        ...(f.params?.control === 'true' ? { checked: '' } : {}),
      });
      box.addEventListener('change', () => {
        const { control, ...rest } = f.params || {};
        f.params = box.checked ? { ...rest, control: 'true' } : rest;
        scheduleRankCheck();
      });
      paramsCell.append(el('label', { class: 'muted small' }, box, ' control case'));
    }
    if (!paramsCell.childNodes.length) paramsCell.append(el('span', { class: 'muted' }, KINDS[f.kind]?.hint || ''));
    tr.append(paramsCell);
    tr.append(el('td', { class: 'check' }, renderCheck(f)));
    const remove = el(
      'button',
      { type: 'button', class: 'secondary small-btn', 'aria-label': `Remove ${f.name}` },
      '✕',
    );
    remove.addEventListener('click', () => {
      // What the page imported from it goes with it.
      state.files = state.files.filter((x) => x !== f && x.importedFrom !== f.name);
      renderFiles();
      scheduleRankCheck();
    });
    tr.append(el('td', {}, remove));
    tbody.append(tr);
  }
  updateRunButtons();
}

function renderCheck(f) {
  const c = f.check;
  if (c.status === 'pending') return el('span', { class: 'muted' }, 'checking…');
  if (c.status === 'bad')
    return el('div', { class: 'issue bad', role: 'alert' }, el('strong', {}, '✗ '), formatError(c.error));
  const box = el(
    'div',
    {},
    el('span', { class: c.status === 'ok' ? 'status-ok' : 'status-warn' }, c.status === 'ok' ? '✓ ' : '⚠ '),
    c.summary || 'valid',
  );
  if (c.warnings?.length) {
    const list = el('ul', {});
    for (const w of c.warnings.slice(0, 5)) list.append(el('li', {}, formatError(w)));
    if (c.warnings.length > 5) list.append(el('li', {}, `… and ${c.warnings.length - 5} more`));
    box.append(
      el('div', { class: 'issue warn' }, `${c.warnings.length} warning${c.warnings.length === 1 ? '' : 's'}:`, list),
    );
  }
  return box;
}

// ---------------------------------------------------------------- example ----------------
async function loadExample() {
  try {
    const index = await (await fetch('examples/index.json')).json();
    const wanted = exampleFiles(index);
    for (const path of wanted) {
      const res = await fetch(`examples/${path}`);
      if (!res.ok) throw new Error(`examples/${path}: HTTP ${res.status}`);
      addText(path, await res.text());
    }
    renderFiles();
    await Promise.all(state.files.map(identifyAndCheck));
    announce(`Example loaded: ${wanted.length} files`);
    document.querySelector('[data-job]')?.focus();
  } catch (e) {
    showRunError({ message: `Could not load the example: ${e.message}` });
  }
}

/** The example set: everything under examples/ a job of the page reads, except the
 *  duplicated formats (topics.jsonl repeats topics.xml, answers.jsonl the per-file CSVs,
 *  the combined qrels the per-dimension ones), the HiTZ importer's files, the HealthBench
 *  files (imported, they would be a second file to grade beside conversations.jsonl and a
 *  second people's file beside judged.jsonl), and sentences.txt (the input of `medrank
 *  embed`, which the page does not run: as evidence it would wait for prompts to draft
 *  for, which the example leaves out). The people's judgements
 *  (rubric/judged.jsonl) and the grader's file (rubric/grader.jsonl) are Agreement's: each
 *  has a kind of its own, so Rubric still scores rubric/graded.jsonl. */
function exampleFiles(index) {
  const skip = [
    /^ros\//,
    /^nrp\/topics\.jsonl$/,
    /^nrp\/answers\.jsonl$/,
    /^nrp\/qrels\.combined/,
    /^rubric\/healthbench\//,
    /^sentences\.txt$/,
    // The Draft job's files: its formulary would be a second documents file for NRP.
    /^draft\//,
    /README/i,
    /\.md$/,
  ];
  return index.filter((p) => !skip.some((re) => re.test(p)));
}

// ---------------------------------------------------------------- check before a run ------
// A job's checks that need no model (for ranking: the import of the Ranking-Over-Scoring
// files, the bundle, the control cases) run whenever files or options change, so a problem
// shows before the model loads, with what a model run will encode (the job's `check`).
let rankCheckTimer = null;
let rankCheckSeq = 0;
function scheduleRankCheck() {
  clearTimeout(rankCheckTimer);
  rankCheckTimer = setTimeout(runRankCheck, 200);
}

async function runRankCheck() {
  const job = Object.values(JOBS).find((j) => j.check);
  const files = state.files.filter((f) => f.kind && f.check.status !== 'bad' && f.check.status !== 'pending');
  const given = files.filter((f) => job?.accepts.includes(f.kind));
  // Checked once the first of its required inputs is there (for ranking: the bundle).
  const first = job?.required[0] || [];
  if (!given.some((f) => first.includes(f.kind))) {
    state.rankCheck = null;
    renderRankCheck();
    return;
  }
  const withModel = selectedModel().source !== 'predictions';
  const seq = ++rankCheckSeq;
  try {
    const reply = await ask({
      type: 'check',
      job: job.name,
      request: { files: given.map(fileForEngine), options: options() },
      withModel,
    });
    if (seq !== rankCheckSeq) return; // a newer check is on its way
    state.rankCheck = { status: 'ok', job: job.name, result: reply.result, withModel };
  } catch (error) {
    if (seq !== rankCheckSeq) return;
    // A check that waited behind a job the user cancelled went with the stopped engine: ask
    // the new one.
    if (error?.cancelled) return scheduleRankCheck();
    state.rankCheck = { status: 'bad', error };
  }
  renderRankCheck();
}

function renderRankCheck() {
  const box = $('#rank-check');
  const c = state.rankCheck;
  box.hidden = !c;
  box.className = `rank-check${c?.status === 'bad' ? ' bad' : ''}`;
  box.replaceChildren();
  updateRunButtons();
  if (!c) return;
  if (c.status === 'bad') {
    box.append(el('strong', {}, 'Before ranking: '), formatError(c.error));
    return;
  }
  const { import: imported, model_run: run } = c.result;
  const parts = [];
  if (imported)
    parts.push(`${imported.instances.toLocaleString()} questions imported from the Ranking-Over-Scoring files`);
  if (run) {
    parts.push(
      `${run.instances.toLocaleString()} instances × ${run.systems.length} systems` +
        (run.generated.length
          ? `, plus the generated control${run.generated.length === 1 ? '' : 's'} ${run.generated.join(', ')}`
          : ''),
    );
    // Nothing dropped without a word: the items the ranking leaves out, and how to keep them.
    if (run.left_out_not_enough_evidence)
      parts.push(
        `of them ${run.left_out_not_enough_evidence.toLocaleString()} labelled not_enough_evidence ${run.left_out_not_enough_evidence === 1 ? 'is' : 'are'} left out of the ranking (Options → “keep not_enough_evidence” keeps them)`,
      );
    // The bundled model has no head (the similarity baseline); one trained here has one; a
    // model from this computer may have either.
    const model = selectedModel().source;
    const similarity = run.sequences_similarity?.toLocaleString();
    const head = run.sequences_head.toLocaleString();
    parts.push(
      model === 'bundled'
        ? `the bundled model encodes ${similarity ?? 'no'} sequences`
        : model === 'trained'
          ? `the trained model encodes ${head} sequences`
          : `the model encodes ${head} sequences with a trained head` +
            (similarity != null ? `, ${similarity} without one` : ''),
    );
  }
  box.append(el('span', {}, `Ready: ${parts.join('; ')}. `));
  if (run) box.append(el('span', { class: 'muted' }, 'The time is estimated as the run starts.'));
  // The engine's notes: about the user's own files, in words, its message folded as detail.
  const notes = c.result.notes || [];
  if (notes.length) {
    const list = el('ul', {});
    for (const w of notes) list.append(el('li', {}, formatError(w)));
    box.append(el('div', { class: 'issue warn' }, `${notes.length} note${notes.length === 1 ? '' : 's'}:`, list));
  }
}

// ---------------------------------------------------------------- run --------------------
/** One Run button per job the engine describes, in its order. */
function renderRunButtons() {
  const row = $('#run-buttons');
  row.replaceChildren(
    ...Object.values(JOBS).map((job, i) => {
      const button = el(
        'button',
        { type: 'button', 'data-job': job.name, id: `run-${job.name}`, ...(i === 0 ? { class: 'primary' } : {}) },
        job.label,
      );
      button.addEventListener('click', () => runJob(job.name));
      return button;
    }),
  );
}

/** The Options' fields (`data-option` names the option, as the CLI's flag) at the engine's
 *  defaults: the page types none of its own. Every job reading an option has the same
 *  default for it (a test in the engine holds them to it). */
function fillOptions() {
  const defaults = Object.assign({}, ...Object.values(JOBS).map((job) => job.defaults));
  for (const field of document.querySelectorAll('[data-option]')) {
    const value = defaults[field.dataset.option];
    if (value === undefined) continue;
    if (field.type === 'checkbox') field.checked = Boolean(value);
    else field.value = Array.isArray(value) ? value.join(separator(field)) : String(value);
  }
}

const separator = (field) => (field.dataset.separator === ';' ? '; ' : ', ');

function updateRunButtons() {
  trainingUi?.updateButton();
  const filesBusy = state.reading > 0 || state.files.some((f) => f.check.status === 'pending');
  for (const button of document.querySelectorAll('[data-job]')) {
    const job = JOBS[button.dataset.job];
    const have = new Set(state.files.filter((f) => f.check.status !== 'bad').map((f) => f.kind));
    const missing = job.required.filter((alts) => !alts.some((k) => have.has(k)));
    const chosen = selectedModel().source !== 'predictions';
    const usingModel = job.model !== 'none' && chosen;
    const realMissing = missing.filter((alts) => !(usingModel && alts.some((k) => job.model_replaces.includes(k))));
    const checkFailed = job.check && state.rankCheck?.status === 'bad';
    // A job that runs only on a model: the predictions choice names none.
    const noModel = job.model === 'required' && !chosen;
    button.disabled = !!state.running || filesBusy || realMissing.length > 0 || checkFailed || noModel;
    button.title = filesBusy
      ? 'Wait: the files are still being read and checked.'
      : realMissing.length
        ? `Needs: ${realMissing.map((alts) => alts.map((k) => KINDS[k].label).join(' or ')).join('; ')}`
        : checkFailed
          ? 'Fix the problem shown below the buttons first.'
          : noModel
            ? job.needs_model
            : `Run ${button.textContent}`;
  }
}

function selectedModel() {
  const source = document.querySelector('input[name=model]:checked').value;
  if (source === 'local') {
    // Files picked one by one, or every file of a picked folder (matched by name). A
    // folder is named by its name, as the CLI names a model by its folder.
    const files = [...$('#model-files').files, ...$('#model-folder').files];
    const folder = $('#model-files').files.length
      ? null
      : $('#model-folder').files[0]?.webkitRelativePath.split('/')[0];
    return { source, files, label: folder || files.map((f) => f.name).join('+') || 'local' };
  }
  if (source === 'hub') {
    const id = $('#hub-id').value.trim();
    return { source, id, endpoint: hubEndpoint(), label: id };
  }
  if (source.startsWith('trained:')) {
    // An evaluator trained in this browser (train.js), kept in its storage.
    const radio = document.querySelector('input[name=model]:checked');
    return { source: 'trained', id: source.slice('trained:'.length), label: radio.dataset.label };
  }
  return { source };
}

/** The Options as the engine reads them: each field under its option's name (the CLI's
 *  flag), a number as a number, a list (a field whose default is one) split at its separator. */
function options() {
  const defaults = Object.assign({}, ...Object.values(JOBS).map((job) => job.defaults));
  const out = {};
  for (const field of document.querySelectorAll('[data-option]')) {
    const key = field.dataset.option;
    if (field.type === 'checkbox') out[key] = field.checked;
    else if (field.type === 'number') out[key] = Number(field.value);
    else if (Array.isArray(defaults[key]))
      out[key] = field.value
        .split(separator(field).trim())
        .map((s) => s.trim())
        .filter(Boolean);
    else out[key] = field.value;
  }
  return out;
}

export async function runJob(job, extraOptions = {}) {
  if (state.running) return null;
  hideRunError();
  const files = state.files.filter((f) => f.kind && JOBS[job].accepts.includes(f.kind)).map(fileForEngine);
  const request = {
    files,
    options: { ...options(), ...extraOptions },
    model: JOBS[job].model !== 'none' ? selectedModel() : undefined,
  };
  const cancelBuffer = state.engine?.sharedCancel ? new SharedArrayBuffer(4) : null;
  state.running = { job, cancelBuffer };
  const startedFrom = document.activeElement;
  document.body.classList.add('running');
  updateRunButtons();
  // A Hub model's plan is shown afresh for this run (or not at all when it is kept).
  $('#hub-plan').hidden = true;
  showProgress({ stage: 'Starting', done: 0, total: 0 });
  try {
    const reply = await ask({ type: 'run', job, request, cancelBuffer }, showProgress);
    state.lastResult = {
      job,
      result: reply.result,
      request,
      elapsedMs: reply.elapsedMs,
      modelLoaded: reply.modelLoaded,
      precisionChange: precisionChange(request, reply.result),
    };
    renderResults(state.lastResult, { runJob, jobs: JOBS, addFile: addResultFile });
    if (reply.result.backend) $('#backend-used').replaceChildren(...describeBackend(reply.result));
    $('#report-buttons').hidden = false;
    announce(`Finished in ${(reply.elapsedMs / 1000).toFixed(1)} s`);
    return reply.result;
  } catch (error) {
    if (error?.cancelled || error?.message === 'cancelled')
      showRunError({ message: 'Cancelled. Nothing was changed; run again when ready.' });
    else showRunError(error);
    return null;
  } finally {
    state.running = null;
    $('#progress').hidden = true;
    document.body.classList.remove('running');
    updateRunButtons();
    // The button was disabled while the job ran, which drops keyboard focus to the page:
    // give it back where the run started.
    if (document.activeElement === document.body && startedFrom instanceof HTMLElement) startedFrom.focus();
    if (request.model && request.model.source !== 'predictions') refreshModelStatus();
  }
}

/** Where a ranking of the same inputs ran in the other precision in this session: which
 *  systems changed places between f32 and int8 ({evaluator, task, pairs}), per evaluator
 *  and task; null when it has not run in both, [] when no order changed. */
function precisionChange(request, result) {
  if (!result.ranking || !['f32', 'int8'].includes(result.precision)) return null;
  // The same question asked in the other arithmetic: where it ran (CPU, GPU) aside too.
  const { precision: _p, backend: _b, ...options } = request.options;
  const files = request.files.map((f) => [f.name, f.kind, f.params, f.text.length]);
  const key = JSON.stringify([files, options, request.model?.source, request.model?.label ?? request.model?.id]);
  const kept = state.rankingsByPrecision.get(key) || {};
  kept[result.precision] = result.ranking;
  state.rankingsByPrecision.set(key, kept);
  if (!kept.f32 || !kept.int8) return null;
  const changes = [];
  // The evaluators in the same order (the bundled model's 8-bit copy is another folder, so
  // its evaluator has another name): matched by place and task.
  for (const [i, ev] of kept.f32.entries()) {
    const other = kept.int8[i];
    if (other?.task !== ev.task) continue;
    const ranks = (e) => Object.fromEntries(e.systems.map((s) => [s.system, s.rank]));
    const pairs = swappedPairs(ranks(ev), ranks(other));
    if (pairs.length) changes.push({ evaluator: ev.evaluator, task: ev.task, pairs });
  }
  return changes;
}

/** The pairs of systems whose order differs between two rankings (system -> rank, a tie
 *  counted as an order of its own): [{a, b, before: [rank a, rank b], after: [...]}]. */
function swappedPairs(before, after) {
  const systems = Object.keys(before).filter((s) => s in after);
  const pairs = [];
  for (const [i, a] of systems.entries())
    for (const b of systems.slice(i + 1))
      if (Math.sign(before[a] - before[b]) !== Math.sign(after[a] - after[b]))
        pairs.push({ a, b, before: [before[a], before[b]], after: [after[a], after[b]] });
  return pairs;
}

/** Beside the 8-bit choice: what the bundled model's 8-bit copy saves and what `medrank
 *  quantize` measured it to cost when it made it (the folder's quantization.json). */
async function showInt8Facts() {
  const q = (await ask({ type: 'int8-facts' })).result;
  if (!q) return;
  const measured = [];
  measured.push(
    q.dev
      ? `dev accuracy ${q.dev.int8_accuracy.toFixed(3)} in int8 against ${q.dev.f32_accuracy.toFixed(3)} in f32 (${q.dev.instances} instances of ${q.dev.file})`
      : 'no dev accuracy was measured',
  );
  if (q.embeddings)
    measured.push(
      `its sentence embeddings keep a cosine of ${q.embeddings.mean_cosine.toFixed(4)} on average to the f32 model’s (worst ${q.embeddings.worst_cosine.toFixed(4)}, over ${q.embeddings.texts} texts)`,
    );
  for (const o of q.system_order || []) {
    const rank = (order) => Object.fromEntries(order.map((s, i) => [s, i + 1]));
    const pairs = swappedPairs(rank(o.f32_order), rank(o.int8_order));
    measured.push(
      pairs.length
        ? `on ${o.bundle} (${o.task}) the order of the systems changed: ${pairs.map((p) => `${p.a} and ${p.b} swapped`).join(', ')}`
        : `on ${o.bundle} (${o.task}) the systems kept their order`,
    );
  }
  $('#int8-facts').textContent =
    `The bundled model in 8-bit downloads ${formatBytes(q.int8_bytes)} against ${formatBytes(q.f32_bytes)} in f32. ` +
    `Its accuracy cost, measured when the 8-bit copy was made (medrank quantize): ${measured.join('; ')}.`;
  $('#int8-facts').hidden = false;
}

/** "Ran on the GPU: <adapter>" or "Ran on the CPU (WebAssembly)", in 8-bit when int8 ran,
 *  with why the GPU was not used in the engine's plain words and the technical reason
 *  behind a disclosure. */
function describeBackend({ backend: b, precision, fallback_in_words: why }) {
  const where =
    b.backend === 'gpu'
      ? `Ran on the GPU (WebGPU): ${b.device.trim()}`
      : `Ran on the CPU (WebAssembly) on ${threadsPhrase(state.engine)}${precision === 'int8' ? ', in 8-bit (int8)' : ''}`;
  if (!b.fallback_reason) return [where];
  return [
    `${where}. ${why ?? ''}`,
    ' ',
    el('details', { class: 'detail' }, el('summary', {}, 'Technical detail'), b.fallback_reason),
  ];
}

function showProgress(p) {
  if (p.hubPlan) showHubPlan(p.hubPlan);
  $('#progress').hidden = false;
  $('#progress-stage').textContent = p.stage || 'Working…';
  const bar = $('#progress-bar');
  if (p.total > 0) {
    bar.max = p.total;
    bar.value = p.done;
    // A share of the work (the model's stage counts arithmetic, not sequences); the
    // engine's stage text says what is done in words and the time left.
    $('#progress-count').textContent = `${Math.floor((100 * p.done) / p.total)} %`;
  } else {
    bar.removeAttribute('value'); // indeterminate
    $('#progress-count').textContent = '';
  }
}

function cancelRun() {
  const running = state.running;
  if (!running) return;
  $('#progress-stage').textContent = 'Cancelling…';
  if (running.cancelBuffer) Atomics.store(new Int32Array(running.cancelBuffer), 0, 1);
  // A job that cannot see the flag (a long step between callbacks, or no shared memory):
  // stop the worker outright and start a fresh one.
  setTimeout(
    () => {
      if (state.running !== running) return;
      state.worker.terminate();
      for (const [, waiting] of state.pending) waiting.reject({ message: 'cancelled', cancelled: true });
      state.pending.clear();
      startWorker();
    },
    running.cancelBuffer ? 1500 : 0,
  );
}

function showRunError(error) {
  const box = $('#run-error');
  box.replaceChildren(formatError(error));
  box.hidden = false;
}
function hideRunError() {
  $('#run-error').hidden = true;
}

// ---------------------------------------------------------------- models -----------------
async function refreshModelStatus() {
  try {
    const reply = await ask({ type: 'model-status' });
    $('#model-status').textContent = reply.cached.length
      ? `Cached in this browser: ${reply.cached.length} model file${reply.cached.length === 1 ? '' : 's'}.`
      : 'No model cached in this browser.';
  } catch {
    $('#model-status').textContent = '';
  }
}

// ---------------------------------------------------------------- the Hub ----------------
/** A stand-in Hub for the browser tests (`?hub=http://127.0.0.1:PORT`); the engine refuses
 *  any other than the public Hub or one on this machine, and the server's policy must allow
 *  it (`medrank serve --hub-stand-in`). Undefined: the public Hub. */
function hubEndpoint() {
  return new URLSearchParams(location.search).get('hub') || undefined;
}

/** The engine's suggested checkpoints per role, each one a button that fills the id. */
function renderHubSuggestions(hub) {
  const box = $('#hub-suggestions');
  box.replaceChildren();
  if (!HUB_ACCESS) {
    // A site built with MEDRANK_HUB=off: no Hub choice, no connection.
    $('#hub-choice').hidden = true;
    return;
  }
  $('#hub-from').textContent = new URL(hubEndpoint() || hub.endpoint).host;
  box.append(el('p', {}, 'Suggested public checkpoints (check a model card before relying on one):'));
  const list = el('ul', {});
  for (const group of hub.suggested) {
    const ids = group.checkpoints.map((c) => {
      const use = el('button', { type: 'button', class: 'link-button', 'data-hub-id': c.id }, c.id);
      use.addEventListener('click', () => {
        $('#hub-id').value = c.id;
        document.querySelector('input[name=model][value=hub]').checked = true;
        updateRunButtons();
        scheduleRankCheck();
      });
      return el('span', {}, use, ` (${c.verified_here ? 'verified here' : 'not verified here'})`);
    });
    const item = el('li', {}, `${group.role}: `);
    ids.forEach((node, i) => item.append(...(i ? [', ', node] : [node])));
    list.append(item);
  }
  box.append(list);
}

/** What a Hub model's download takes, shown before its first file is asked for. */
function showHubPlan(plan) {
  state.lastHubPlan = plan;
  const box = $('#hub-plan');
  const cached = plan.files.filter((f) => f.cached).length;
  box.textContent =
    `${plan.name}: ${plan.files.length} files, ${hubBytes(plan.total)}; ` +
    (plan.download
      ? `${hubBytes(plan.download)} to download from ${plan.from}${cached ? ` (${cached} kept in this browser)` : ''}.`
      : plan.offline
        ? `all kept in this browser (the Hub could not be reached).`
        : `all kept in this browser: nothing to download.`);
  box.hidden = false;
}

// ---------------------------------------------------------------- helpers ----------------
function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
function announce(text) {
  $('#live').textContent = text;
}

// ---------------------------------------------------------------- wiring -----------------
function wire() {
  const drop = $('#drop');
  const input = $('#file-input');
  drop.addEventListener('click', () => input.click());
  drop.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      input.click();
    }
  });
  input.addEventListener('change', () => {
    addFiles([...input.files]);
    input.value = '';
  });
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    addFiles([...e.dataTransfer.files]);
  });
  $('#load-example').addEventListener('click', loadExample);
  $('#load-example-2').addEventListener('click', loadExample);
  $('#clear-files').addEventListener('click', () => {
    state.files = [];
    renderFiles();
    scheduleRankCheck();
  });
  $('#cancel').addEventListener('click', cancelRun);
  // The model choices, the trained models' radios (drawn later by train.js) included.
  document.addEventListener('change', (event) => {
    if (event.target.name !== 'model') return;
    updateRunButtons();
    scheduleRankCheck();
  });
  // Any option may change what the check before a run finds.
  for (const field of document.querySelectorAll('[data-option]')) field.addEventListener('change', scheduleRankCheck);
  $('#hub-id').addEventListener('input', () => {
    document.querySelector('input[name=model][value=hub]').checked = true;
    updateRunButtons();
    scheduleRankCheck();
  });
  for (const id of ['#model-files', '#model-folder']) {
    $(id).addEventListener('change', () => {
      document.querySelector('input[name=model][value=local]').checked = true;
      updateRunButtons();
      scheduleRankCheck();
    });
  }
  $('#clear-models').addEventListener('click', async () => {
    await ask({ type: 'clear-models' });
    await refreshModelStatus();
    announce('Cached models cleared');
  });
  $('#download-json').addEventListener('click', () => {
    if (!state.lastResult) return;
    // The same report as the CLI's --json.
    download(
      `medrank-${state.lastResult.job}.json`,
      JSON.stringify(state.lastResult.result.report, null, 2),
      'application/json',
    );
  });
  $('#download-report').addEventListener('click', async () => {
    if (state.lastResult)
      download(`medrank-report-${state.lastResult.job}.html`, buildReportHtml(state.lastResult, JOBS), 'text/html');
  });
  $('#print-report').addEventListener('click', () => window.print());
}

/** Options → CPU threads: the worker's pool starts once, so a new count starts a new worker
 *  (the kept model is read again on the next run). */
function wireThreads() {
  const input = $('#opt-threads');
  input.value = chosenThreads() || navigator.hardwareConcurrency || 1;
  input.addEventListener('change', () => {
    const n = Number(input.value);
    chooseThreads(n === (navigator.hardwareConcurrency || 1) ? null : n);
    if (state.running) return; // takes effect with the next worker
    state.worker.terminate();
    startWorker();
    state.workerReady.then(updateRunButtons);
  });
}

let trainingUi = null;
wire();
startWorker();
trainingUi = wireTraining({ ask, state, selectedModel, updateRunButtons, announce });
state.workerReady.then(() => {
  updateRunButtons();
  refreshModelStatus();
  showInt8Facts().catch(() => {});
});
renderFiles();
wireThreads();
registerServiceWorker({
  busy: () => Boolean(state.running || state.files.length),
  onReloadNeeded: () => {
    $('#engine').textContent += ' — reload this page to run on several threads';
  },
  onRegistered: () => {
    $('#offline').textContent = 'works offline after this visit';
  },
});
// For the browser tests and for debugging from the console.
/** The chosen model's encoder outputs for `inputs` (texts and [text, pair]s): its states
 *  after the last layer and `layer`, and its head's logits (the parity tests' view). */
async function encoderOutputs(inputs, layer, runOptions = options()) {
  const reply = await ask({ type: 'encode', request: { inputs, layer, options: runOptions, model: selectedModel() } });
  return reply.result;
}

window.medrank = { state, runJob, encoderOutputs, refreshTrained: () => trainingUi.refreshTrained() };
