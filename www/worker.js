// The worker: loads the wasm build of the medrank library and runs every heavy job, so the
// page never freezes. Messages in: {type: 'describe' | 'check-file' | 'check' | 'run' | 'bench' |
// 'encode' | 'workload' | 'gradient-check' | 'int8-check' | 'int8-facts' | 'model-status' | 'clear-models' | 'train' |
// 'train-cancel' | 'train-estimates' | 'training-choices' | 'trained-list' | 'trained-files' | 'trained-delete', id,
// ...}; out: 'ready' (the engine's description: the file kinds, the jobs, the training form's
// defaults), 'progress', 'described', 'checked', 'result', 'error', 'fatal' and the training
// replies (ARCHITECTURE.md). Every job runs through the library's one `run(job, request)` (or
// the kept model's `run`): the same library code as the CLI.
//
// Three builds: pkg-threads-relaxed/ (atomics + shared memory, rayon's pool on Web Workers,
// relaxed-SIMD fused multiply-add) when the page is cross-origin isolated and the browser
// validates relaxed SIMD (Chromium; not Safari), else pkg-threads/ (the same without relaxed
// SIMD), else pkg/ (one thread). Each falls back to the next if it cannot start. The thread
// count comes from the URL (`worker.js?threads=N`, the page's Options), default
// navigator.hardwareConcurrency; `simd=plain` skips the relaxed build (the bench page's
// comparison).

import { loadHubModel } from './hub.js';

const MODEL_CACHE = 'medrank-models-v1';
const BUNDLED_MODEL = 'models/all-MiniLM-L6-v2/';
// Its 8-bit copy (int8 weights, a quarter of the download), loaded for the int8 precision
// when the site has it; without it the f32 folder loads and is quantized as it loads.
const BUNDLED_INT8 = 'models/all-MiniLM-L6-v2-int8/';
const MODEL_FILES = ['config.json', 'tokenizer.json', 'model.safetensors'];
// sentence-transformers' pooling settings, read when the model has them (as the CLI does).
const OPTIONAL_MODEL_FILES = ['1_Pooling/config.json', 'modules.json', 'sentence_bert_config.json'];

// Cancellation: the page shares one Int32 with us when the browser allows shared memory
// (cross-origin isolated); the progress callback returns false once it is set. Otherwise the
// page simply terminates this worker and starts a new one.
let cancelFlag = null;

let medrank = null;
// The jobs by name, as the engine describes them (whether one needs the model, ...).
const JOBS = {};
const ready = loadEngine()
  .then((engine) => {
    const described = JSON.parse(medrank.describe());
    for (const job of described.jobs) JOBS[job.name] = job;
    postMessage({
      type: 'ready',
      ...described,
      sharedCancel: typeof SharedArrayBuffer !== 'undefined' && self.crossOriginIsolated === true,
      ...engine,
    });
  })
  .catch((e) => {
    postMessage({ type: 'fatal', error: { message: `Could not load the medrank engine: ${e.message || e}` } });
  });

/** Loads the build this page can run; resolves to {threads, threadedBuild, relaxedSimd, threadsWhy}. */
async function loadEngine() {
  const params = new URL(self.location.href).searchParams;
  const asked = Number(params.get('threads'));
  const wanted = Number.isInteger(asked) && asked > 0 ? asked : navigator.hardwareConcurrency || 1;
  let why = null;
  if (!(self.crossOriginIsolated === true && typeof SharedArrayBuffer !== 'undefined')) {
    why = 'this host does not allow shared memory (the page is not cross-origin isolated)';
  } else if (wanted < 2) {
    why = 'one thread chosen in Options';
  } else {
    const builds =
      params.get('simd') !== 'plain' && relaxedSimd() ? ['pkg-threads-relaxed', 'pkg-threads'] : ['pkg-threads'];
    for (const build of builds) {
      try {
        medrank = await import(`./${build}/medrank.js`);
        await medrank.default();
        await medrank.initThreadPool(wanted);
        const info = JSON.parse(medrank.describe()).build;
        return {
          threads: info.threads,
          threadedBuild: true,
          relaxedSimd: build === 'pkg-threads-relaxed',
          threadsWhy: null,
          simd: info.simd,
        };
      } catch (e) {
        // A site built without this build, or a browser that refuses it: the next one.
        why = `the threaded build could not start (${e.message || e})`;
        medrank = null;
      }
    }
  }
  medrank = await import('./pkg/medrank.js');
  await medrank.default();
  const simd = JSON.parse(medrank.describe()).build.simd;
  return { threads: 1, threadedBuild: false, relaxedSimd: false, threadsWhy: why, simd };
}

/** Whether this browser runs relaxed SIMD: it validates a module of one function,
 *  `(param v128) (result v128)` returning `f32x4.relaxed_madd` of its argument thrice. */
function relaxedSimd() {
  const module = new Uint8Array([
    0, 97, 115, 109, 1, 0, 0, 0, 1, 6, 1, 96, 1, 123, 1, 123, 3, 2, 1, 0, 10, 13, 1, 11, 0, 32, 0, 32, 0, 32, 0, 253,
    133, 2, 11,
  ]);
  try {
    return WebAssembly.validate(module);
  } catch {
    return false;
  }
}

self.onmessage = async (event) => {
  const msg = event.data;
  await ready;
  if (!medrank) return; // the engine did not load: 'fatal' was posted
  try {
    if (msg.type === 'describe') {
      const result = medrank.describe_file(msg.name, msg.text, msg.kind ?? undefined);
      postMessage({ type: 'described', id: msg.id, result });
    } else if (msg.type === 'check-file') {
      const result = medrank.check_file(msg.file);
      postMessage({ type: 'checked', id: msg.id, result });
    } else if (msg.type === 'check') {
      // A job's checks before any model loads and what a model run will encode.
      const result = JSON.parse(medrank.check(msg.job, JSON.stringify(msg.request), msg.withModel));
      postMessage({ type: 'checked', id: msg.id, result });
    } else if (msg.type === 'run') {
      cancelFlag = msg.cancelBuffer ? new Int32Array(msg.cancelBuffer) : null;
      await keptModelTurn(() => runJob(msg));
    } else if (msg.type === 'encode') {
      // The encoder's own states and logits for texts and pairs (the parity tests' view).
      const result = await keptModelTurn(async () => {
        const { model: choice, ...request } = msg.request;
        const { model } = await keptModel(choice, () => true, request.options?.precision);
        return JSON.parse(await model.encoder_outputs(JSON.stringify(request)));
      });
      postMessage({ type: 'result', id: msg.id, result });
    } else if (msg.type === 'bench') {
      await runBench(msg);
    } else if (msg.type === 'workload') {
      await runWorkload(msg);
    } else if (msg.type === 'gradient-check') {
      // The GPU trainer's gradients against candle's autograd on this adapter.
      postMessage({ type: 'result', id: msg.id, result: JSON.parse(await medrank.self_check('gradients')) });
    } else if (msg.type === 'int8-facts') {
      // What `medrank quantize` measured when it made the bundled model's 8-bit copy (its
      // quantization.json), or null when the site has no such copy.
      postMessage({ type: 'result', id: msg.id, result: await int8Facts() });
    } else if (msg.type === 'int8-check') {
      // This build's int8 kernels against the scheme's formula: the kernels' names, or an error.
      postMessage({ type: 'result', id: msg.id, result: { kernels: JSON.parse(await medrank.self_check('int8')) } });
    } else if (msg.type === 'clear-models') {
      const removed = await caches.delete(MODEL_CACHE);
      postMessage({ type: 'models-cleared', id: msg.id, removed });
    } else if (msg.type === 'train') {
      await keptModelTurn(() => runTraining(msg));
    } else if (msg.type === 'train-cancel') {
      trainCancel = true;
    } else if (msg.type === 'train-estimates') {
      // Each recipe's time on the form's data, at this model's speed measured here.
      const result = await keptModelTurn(async () => {
        const { model } = await keptModel(msg.model, () => true);
        return model.train_estimates(msg.request);
      });
      postMessage({ type: 'train-estimates', id: msg.id, result });
    } else if (msg.type === 'training-choices') {
      postMessage({ type: 'training-choices', id: msg.id, result: medrank.training_choices(msg.name, msg.text) });
    } else if (msg.type === 'trained-list') {
      postMessage({ type: 'trained-list', id: msg.id, result: await listTrained() });
    } else if (msg.type === 'trained-files') {
      postMessage({ type: 'trained-files', id: msg.id, result: await trainedFiles(msg.trainedId) });
    } else if (msg.type === 'trained-delete') {
      await deleteTrained(msg.trainedId);
      postMessage({ type: 'trained-deleted', id: msg.id });
    } else if (msg.type === 'model-status') {
      postMessage({ type: 'model-status', id: msg.id, cached: await cachedModelFiles() });
    }
  } catch (e) {
    postMessage({ type: 'error', id: msg.id, error: toError(e) });
  }
};

async function runJob(msg) {
  const job = JOBS[msg.job];
  if (!job) throw new Error(`This build of medrank has no job "${msg.job}".`);
  const started = performance.now();
  let lastPost = 0;
  // Called by the library every few items: post at most ~20 progress messages a second.
  const progress = (stage, done, total) => {
    const now = performance.now();
    if (now - lastPost > 50 || done === total) {
      lastPost = now;
      postMessage({ type: 'progress', id: msg.id, stage, done, total, elapsedMs: now - started });
    }
    return !(cancelFlag && Atomics.load(cancelFlag, 0) === 1);
  };
  const { model: choice, ...request } = msg.request;
  let reply;
  let modelLoaded = null;
  if (job.model !== 'none' && choice && choice.source !== 'predictions') {
    // The kept model runs the job (the evaluator, the grader, the NLI model): WebGPU or the
    // wasm CPU (request.options.backend), in request.options.precision.
    // A Hub model's plan (its files and sizes, what is cached) goes out before any download.
    const onPlan = (hubPlan) =>
      postMessage({ type: 'progress', id: msg.id, stage: 'Downloading', done: 0, total: 0, hubPlan });
    const { model, loaded } = await keptModel(choice, progress, request.options?.precision, onPlan);
    modelLoaded = loaded;
    reply = await model.run(msg.job, JSON.stringify(request), progress);
  } else if (job.model === 'required') {
    throw new Error(job.needs_model);
  } else {
    reply = await medrank.run(msg.job, JSON.stringify(request), progress);
  }
  // Jobs return the report (what the CLI writes with --json) with its views, as JSON text.
  const result = JSON.parse(reply);
  postMessage({
    type: 'result',
    id: msg.id,
    job: msg.job,
    result,
    modelLoaded,
    elapsedMs: performance.now() - started,
  });
}

/** The benchmark page's job: the bundled model on the chosen backends and cells. */
async function runBench(msg) {
  const progress = (stage, done, total) => {
    postMessage({ type: 'progress', id: msg.id, stage, done, total });
    return true;
  };
  // The bundled f32 folder (the grid's int8 runs quantize it as the page's Options would),
  // or a folder picked on the bench page.
  const { model } = await keptModel(msg.model || { source: 'bundled' }, progress);
  const precisions = msg.precisions || ['f32'];
  const request = { grid: { backends: msg.backends, precisions, cells: msg.cells, min_seconds: msg.minSeconds } };
  const reply = await model.bench(JSON.stringify(request), progress);
  postMessage({ type: 'result', id: msg.id, result: JSON.parse(reply) });
}

/** The benchmark page's workload: `evaluate` with the bundled model on the bundle made from
 *  the CasiMedicos dev file the site serves (as `medrank bench --parts workload`). */
async function runWorkload(msg) {
  const progress = (stage, done, total) => {
    postMessage({ type: 'progress', id: msg.id, stage, done, total });
    return true;
  };
  const response = await fetch(new URL('data/casimedicos/dev.jsonl', self.location.href));
  if (!response.ok) throw new Error(`The workload data is missing from this site (HTTP ${response.status}).`);
  const dev = await response.text();
  const { model } = await keptModel({ source: 'bundled' }, progress);
  const results = [];
  for (const backend of msg.backends) {
    try {
      results.push(JSON.parse(await model.bench(JSON.stringify({ workload: { dev_text: dev, backend } }), progress)));
    } catch (e) {
      results.push({ backend, error: toError(e).message });
    }
  }
  postMessage({ type: 'result', id: msg.id, result: results });
}

// The model stays in this worker (parsed weights, CPU layers, WebGPU buffers) until the user
// picks another one: a second job with the same model starts encoding at once.
let kept = null; // {key, model}

/** Identifies a model choice: the bundled one (by its folder), a Hub id (with the Hub it
 *  comes from), or picked files by name, size and date. */
function modelKey(choice) {
  if (choice.source === 'bundled') return `bundled:${choice.folder}`;
  if (choice.source === 'hub') return `hub:${choice.endpoint || ''}:${choice.id}`;
  if (choice.source === 'trained') return `trained:${choice.id}`;
  const files = (choice.files || []).map((f) => `${f.webkitRelativePath || f.name}:${f.size}:${f.lastModified}`).sort();
  return `local:${choice.label}:${files.join('|')}`;
}

/** The kept model for `choice`, loading it (and freeing the previous one) when it differs.
 *  The bundled model's folder depends on the precision (its 8-bit copy for int8). */
// The kept model serves one call at a time (its methods borrow it mutably across their
// awaits): a recipe estimate asked while the form is filled in and the training that
// follows take turns.
let keptModelQueue = Promise.resolve();
function keptModelTurn(fn) {
  const turn = keptModelQueue.then(fn, fn);
  keptModelQueue = turn.catch(() => {});
  return turn;
}

async function keptModel(choice, progress, precision, onPlan = () => {}) {
  if (choice.source === 'bundled') choice = { ...choice, folder: await bundledFolder(precision) };
  const key = modelKey(choice);
  if (kept && kept.key === key) return { model: kept.model, loaded: false };
  if (kept) {
    kept.model.free();
    kept = null;
  }
  progress('Loading the model', 0, 1);
  const files = await loadModel(choice, progress, onPlan);
  progress('Reading the model', 0, 1);
  kept = { key, model: new medrank.Model(files) };
  return { model: kept.model, loaded: true };
}

/** The bundled 8-bit copy's quantization.json (FORMATS.md §9), or null. */
async function int8Facts() {
  try {
    // Not a file any model loads: asked with no-store, which the service worker honours, so
    // the cached model files are only those a job read, whenever the worker came under the
    // service worker's control (once, a load that raced it counted this file too).
    const res = await fetch(new URL(BUNDLED_INT8 + 'quantization.json', self.location.href).href, {
      cache: 'no-store',
    });
    return res.ok ? await res.json() : null;
  } catch {
    return null;
  }
}

let int8Served = null; // whether this site serves the bundled model's 8-bit copy (asked once)

/** The bundled model's folder for `precision`: the 8-bit copy for int8 when the site has it
 *  (its config.json answers; kept in the Cache API like the model's files), else the f32
 *  folder, which the library quantizes as it loads. */
async function bundledFolder(precision) {
  if (precision !== 'int8') return BUNDLED_MODEL;
  if (int8Served === null) {
    const url = new URL(BUNDLED_INT8 + 'config.json', self.location.href).href;
    const cache = await caches.open(MODEL_CACHE);
    if (await cache.match(url)) {
      int8Served = true;
    } else {
      try {
        const fetched = await fetch(url);
        int8Served = fetched.ok;
        if (fetched.ok) await keep(cache, url, fetched);
      } catch {
        int8Served = false;
      }
    }
  }
  return int8Served ? BUNDLED_INT8 : BUNDLED_MODEL;
}

/** The model's files as {config, tokenizer, weights}, from the Cache API when stored there. */
async function loadModel(choice, progress, onPlan) {
  if (choice.source === 'trained') return loadTrained(choice.id);
  const cache = await caches.open(MODEL_CACHE);
  if (choice.source === 'hub') {
    const { name, files } = await loadHubModel({ medrank, choice, progress, onPlan, keep, cache });
    return engineFiles(name, files);
  }
  const files = {};
  for (const [i, name] of MODEL_FILES.entries()) {
    progress(`Loading the model: ${name}`, i, MODEL_FILES.length);
    let response;
    if (choice.source === 'bundled') {
      const url = new URL(choice.folder + name, self.location.href).href;
      response = await cache.match(url);
      if (!response) {
        const fetched = await fetch(url);
        if (!fetched.ok)
          throw new Error(`The bundled model is missing from this site (${name}: HTTP ${fetched.status}).`);
        await keep(cache, url, fetched);
        response = fetched;
      }
    } else {
      const file = choice.files.find((f) => f.name === name && (f.webkitRelativePath || name).split('/').length <= 2);
      // A DeBERTa-v3 folder with its SentencePiece model only: the engine refuses it in words.
      if (!file && name === 'tokenizer.json' && choice.files.some((f) => f.name === 'spm.model')) {
        files.spmOnly = true;
        continue;
      }
      if (!file)
        throw new Error(
          `The chosen model folder has no ${name}: pick config.json, tokenizer.json and model.safetensors.`,
        );
      // Stored under a same-origin key that is never requested from the network.
      const key = new URL(`local-models/${encodeURIComponent(choice.label)}/${name}`, self.location.href).href;
      response = new Response(file);
      await keep(cache, key, response);
    }
    files[name] = new Uint8Array(await response.arrayBuffer());
  }
  for (const name of OPTIONAL_MODEL_FILES) {
    const bytes = await optionalModelFile(choice, cache, name);
    if (bytes) files[name] = bytes;
  }
  // A folder medrank trained carries its dev figures: every result of it says them
  // (jobs::quality), as the CLI's do.
  if (choice.source === 'local') {
    const log = await optionalModelFile(choice, cache, 'train_log.json');
    if (log) files['train_log.json'] = log;
  }
  progress('Loading the model', MODEL_FILES.length, MODEL_FILES.length);
  // The name reports use for the evaluator and the model's fingerprints: the bundled model's
  // site path equals the repo path the CLI is given (models/all-MiniLM-L6-v2).
  return engineFiles(choice.source === 'bundled' ? choice.folder.replace(/\/$/, '') : choice.label, files);
}

/** A model's files by path as the engine's Model takes them. */
function engineFiles(name, files) {
  const text = (path) => (files[path] ? new TextDecoder().decode(files[path]) : undefined);
  return {
    name,
    config: text('config.json'),
    tokenizer: text('tokenizer.json'),
    weights: files['model.safetensors'],
    pooling: text('1_Pooling/config.json'),
    modules: text('modules.json'),
    sentence_config: text('sentence_bert_config.json'),
    spm_only: files.spmOnly,
    train_log: text('train_log.json'),
  };
}

/** An optional model file's bytes, or null: from the site (cached like the others) or from
 *  the picked files (a folder pick gives webkitRelativePath, so 1_Pooling/config.json is
 *  told apart from the model's own config.json). */
async function optionalModelFile(choice, cache, name) {
  if (choice.source === 'bundled') {
    const url = new URL(choice.folder + name, self.location.href).href;
    let response = await cache.match(url);
    if (!response) {
      const fetched = await fetch(url);
      if (!fetched.ok) return null;
      await keep(cache, url, fetched);
      response = fetched;
    }
    return new Uint8Array(await response.arrayBuffer());
  }
  const file = choice.files.find(
    (f) => (f.webkitRelativePath || '').endsWith('/' + name) || (!name.includes('/') && f.name === name),
  );
  return file ? new Uint8Array(await file.arrayBuffer()) : null;
}

/** Stores a model file in the Cache API for the next visit. Only a convenience: a browser
 *  that refuses (storage quota, a file of hundreds of MB) still runs the job, uncached. */
async function keep(cache, key, response) {
  try {
    await cache.put(key, response.clone());
  } catch (e) {
    console.warn(`medrank: ${key} is not cached (${e.message || e}); it is read again next time`);
  }
}

async function cachedModelFiles() {
  if (!(await caches.has(MODEL_CACHE))) return [];
  const cache = await caches.open(MODEL_CACHE);
  return (await cache.keys()).map((r) => new URL(r.url).pathname);
}

/** Errors from wasm arrive as {message, location?}; JS errors as Error objects. */
function toError(e) {
  if (e && typeof e === 'object' && 'message' in e && !(e instanceof Error)) return e;
  if (e instanceof Error) return { message: e.message };
  return { message: String(e) };
}

// ---------------------------------------------------------------- training ---------------
// `medrank train` in steps (the library's TrainingJob): between two steps this worker goes
// back to its message loop, so progress goes out and a 'train-cancel' message is seen.
// Trained evaluators are kept in the Cache API (their folder's files and a meta.json), listed
// after a reload, loaded like any model folder (source 'trained').

const TRAINED_CACHE = 'medrank-trained-v1';
const TRAINED_FILES = ['config.json', 'tokenizer.json', 'model.safetensors', 'train_log.json'];
let trainCancel = false;

/** Resolves after the message loop had a turn (a 'train-cancel' may arrive); true if the
 *  user cancelled. */
async function cancelled() {
  await new Promise((resolve) => setTimeout(resolve, 0));
  return trainCancel;
}

/** msg: {model: the base model's choice, request: the form (TrainPageRequest), name}. Posts
 *  'progress' as the library's steps report it (`page::training::TrainProgress`: stage, done,
 *  total, `left` the estimate of time left for the whole training; `summary` once the data is
 *  read, `epoch` with each epoch's log), then 'result' {report, outcome, stored} or 'error'
 *  ({cancelled: true} on cancel; then nothing is kept). */
async function runTraining(msg) {
  trainCancel = false;
  const started = performance.now();
  const post = (extra) =>
    postMessage({ type: 'progress', id: msg.id, elapsedMs: performance.now() - started, ...extra });
  const progress = (stage, done, total) => {
    post({ stage, done, total });
    return true;
  };
  const { model } = await keptModel(msg.model, progress);
  const summary = await model.train_start(msg.request);
  // The data is read: the summary goes out; the frozen pass's first report names its stage.
  post({ summary });
  const stop = () => {
    model.train_abort();
    postMessage({ type: 'error', id: msg.id, error: { message: 'cancelled', cancelled: true } });
  };
  let backend = null; // where the frozen encoder ran: {backend, device, fallback_reason}
  let trainedOn = 'cpu'; // where the trained part runs: cpu | gpu
  for (;;) {
    if (await cancelled()) return stop();
    // A few batches per step: progress stays fresh, the loop overhead stays small.
    const p = await model.train_encode(2);
    // Why the CPU ran, in words, travels with the backend it explains.
    backend = { ...p.backend, in_words: p.fallback_in_words };
    trainedOn = p.trained_on;
    post({ stage: p.stage, done: p.done, total: p.total, left: p.left, backend, gpuMemory: p.gpu_memory });
    if (p.finished) break;
  }
  const encodedMs = performance.now() - started;
  for (;;) {
    if (await cancelled()) return stop();
    // The epoch's stages go out as they start (the worker is busy inside the call).
    const p = await model.train_epoch((q) => post(q));
    post(p);
    if (p.over) break;
  }
  const { report, outcome, files } = await model.train_finish();
  post({ stage: 'Saving the evaluator in this browser', done: 0, total: 0 });
  // A browser may refuse to keep it (its storage quota; a base-size model is 440 MB): the
  // trained evaluator is not lost then, its files go to the page to be downloaded.
  let stored = null;
  let notStored = null;
  try {
    stored = await storeTrained(msg, report, files);
  } catch (e) {
    notStored = { reason: e.message || String(e), name: trainedName(msg), files };
  }
  postMessage({
    type: 'result',
    id: msg.id,
    job: 'train',
    result: { report, outcome, summary, stored, notStored, backend, trainedOn },
    featuresMs: encodedMs,
    elapsedMs: performance.now() - started,
  });
}

function trainedKey(id, name) {
  return new URL(`trained-models/${encodeURIComponent(id)}/${name}`, self.location.href).href;
}

/** Keeps a trained evaluator's files and its meta.json; returns the meta. */
/** The name the user gave the evaluator, or one saying what it is: TASK-ARGUMENT-TRAINED-DATE
 *  ("misinformation-expert-head-2026-11-27T21:10"; `random` for a random system's argument,
 *  `top2` for the head and the top 2 layers). */
function trainedName(msg) {
  // The form sends every field (the engine's defaults fill them).
  const { task, arguments: args, freeze } = msg.request;
  const argument = args.startsWith('system:') ? args.slice('system:'.length) : args.split(':')[0];
  const trained = freeze.replace(':', '');
  return (msg.name || '').trim() || `${task}-${argument}-${trained}-${new Date().toISOString().slice(0, 16)}`;
}

/** Keeps a trained evaluator's files and meta.json in the Cache API; on a refusal, removes
 *  what was written (nothing half-kept is listed) and throws. */
async function storeTrained(msg, report, files) {
  const cache = await caches.open(TRAINED_CACHE);
  const id = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const meta = {
    id,
    name: trainedName(msg),
    created: new Date().toISOString(),
    task: msg.request.task,
    arguments: msg.request.arguments,
    freeze: msg.request.freeze,
    base: msg.model.source === 'bundled' ? BUNDLED_MODEL.replace(/\/$/, '') : msg.model.label || msg.model.source,
    best_epoch: report.best_epoch,
    best_dev_accuracy: report.best_dev_accuracy,
    // The measured quality (jobs::quality): the list says it, and whether to trust it.
    quality: report.quality,
  };
  try {
    for (const name of TRAINED_FILES) await cache.put(trainedKey(id, name), new Response(files[name]));
    // meta.json last: a listed evaluator has all its files.
    await cache.put(trainedKey(id, 'meta.json'), new Response(JSON.stringify(meta)));
  } catch (e) {
    for (const name of [...TRAINED_FILES, 'meta.json']) await cache.delete(trainedKey(id, name));
    throw e;
  }
  return meta;
}

async function listTrained() {
  if (!(await caches.has(TRAINED_CACHE))) return [];
  const cache = await caches.open(TRAINED_CACHE);
  const metas = [];
  for (const request of await cache.keys()) {
    if (!request.url.endsWith('/meta.json')) continue;
    metas.push(await (await cache.match(request)).json());
  }
  return metas.sort((a, b) => a.created.localeCompare(b.created));
}

/** {meta, files: {name: Uint8Array}} of a kept evaluator. */
async function trainedFiles(id) {
  const cache = await caches.open(TRAINED_CACHE);
  const metaResponse = await cache.match(trainedKey(id, 'meta.json'));
  if (!metaResponse) throw new Error('This trained evaluator is no longer kept in this browser.');
  const files = {};
  for (const name of TRAINED_FILES) {
    const response = await cache.match(trainedKey(id, name));
    if (!response) throw new Error(`The trained evaluator's ${name} is missing from this browser's storage.`);
    files[name] = new Uint8Array(await response.arrayBuffer());
  }
  return { meta: await metaResponse.json(), files };
}

async function deleteTrained(id) {
  const cache = await caches.open(TRAINED_CACHE);
  for (const name of [...TRAINED_FILES, 'meta.json']) await cache.delete(trainedKey(id, name));
  if (kept && kept.key === `trained:${id}`) {
    kept.model.free();
    kept = null;
  }
}

/** A kept evaluator's files as the Model constructor takes them. */
async function loadTrained(id) {
  const { meta, files } = await trainedFiles(id);
  const text = (name) => new TextDecoder().decode(files[name]);
  return {
    name: meta.name,
    config: text('config.json'),
    tokenizer: text('tokenizer.json'),
    weights: files['model.safetensors'],
    // Its dev figures: every result of it carries them (jobs::quality).
    train_log: text('train_log.json'),
  };
}
