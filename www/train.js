// The "Train an evaluator" section: the form (its names match `medrank train`'s flags), the
// training's progress and curve, and the evaluators kept in this browser (use, download as a
// model folder in a .zip, delete). The worker runs the library's training steps
// (worker.js, runTraining); nothing here computes a number.
import { el, download, formatError } from './dom.js';
import { trainingCurve } from './charts.js';
import { zipStored } from './zip.js';

const $ = (sel) => document.querySelector(sel);

/** The names of the dev metrics that pick the best epoch (`select_by` in the reports). */
const METRIC_NAMES = { accuracy: 'accuracy', macro_f1: 'macro-F1', loss: 'loss', spearman: 'Spearman' };

/** ctx: {ask, state, selectedModel, updateRunButtons, announce}. */
export function wireTraining(ctx) {
  const form = { train: null, dev: null, choices: null };
  // The form's fields (`data-train` names each as `medrank train`'s flag) start at the
  // engine's defaults; the tasks come from its task table.
  ctx.state.workerReady.then((engine) => {
    const { defaults, tasks, recipes } = engine.training;
    $('#train-task').replaceChildren(...tasks.map((t) => el('option', { value: t.name }, t.label)));
    $('#train-recipe').append(...recipes.map((r) => el('option', { value: r.name }, r.label)));
    for (const field of document.querySelectorAll('[data-train]')) {
      const value = defaults[field.dataset.train];
      if (value == null || field.id === 'train-arguments') continue;
      field.value = String(value);
    }
    showArguments(engine.training.arguments);
  });

  const readFile = async (input) => {
    const file = input.files[0];
    return file ? { name: file.name, text: await file.text() } : null;
  };

  $('#train-file').addEventListener('change', async () => {
    hideError();
    form.train = await readFile($('#train-file'));
    form.choices = null;
    $('#train-file-info').textContent = '';
    if (form.train) {
      try {
        const reply = await ctx.ask({ type: 'training-choices', name: form.train.name, text: form.train.text });
        form.choices = reply.result;
        showChoices(form.choices);
        estimate();
      } catch (error) {
        showError(error);
      }
    }
    updateButton();
  });
  $('#train-dev-file').addEventListener('change', async () => {
    form.dev = await readFile($('#train-dev-file'));
    document.querySelector('input[name=train-dev][value=file]').checked = true;
    updateButton();
  });
  for (const radio of document.querySelectorAll('input[name=train-dev]'))
    radio.addEventListener('change', updateButton);
  // The recipes' estimates follow the form (its data and options, the Model section's backend).
  for (const field of document.querySelectorAll('[data-train], input[name=train-dev], [data-option=backend]'))
    field.addEventListener('change', estimate);

  /** Each recipe's time on the form's data, measured by the engine on the chosen model
   *  (`page::training::recipe_estimates`); the latest request's answer is shown. */
  let estimateCount = 0;
  async function estimate() {
    if (!form.train || !form.choices || ctx.state.running) return;
    const mine = ++estimateCount;
    $('#train-estimates').textContent = 'Estimating each recipe’s time…';
    // Several changes in a row (a form filled in) ask once, for the last of them.
    await new Promise((resolve) => setTimeout(resolve, 300));
    if (mine !== estimateCount || ctx.state.running) return;
    try {
      const reply = await ctx.ask({ type: 'train-estimates', model: baseModel(), request: request() });
      if (mine !== estimateCount) return;
      $('#train-estimates').textContent = reply.result.map((e) => `${e.recipe}: ${e.what}, ${e.text}`).join('; ');
    } catch (error) {
      if (mine === estimateCount) $('#train-estimates').textContent = `No estimate: ${formatError(error)}`;
    }
  }
  $('#train-run').addEventListener('click', train);
  $('#train-cancel').addEventListener('click', () => {
    $('#train-stage').textContent = 'Cancelling…';
    // Seen between two training steps (the worker yields to its message loop after each).
    ctx.state.worker.postMessage({ type: 'train-cancel' });
  });

  /** The arguments a file's instances can carry, as the engine lists them ({value, label,
   *  explain}), starting at `chosen` (the engine's default for the file: the arguments it
   *  carries), with the chosen one's line on what training with it measures. */
  function showArguments(choices, chosen) {
    const select = $('#train-arguments');
    select.replaceChildren(...choices.map((c) => el('option', { value: c.value }, c.label)));
    if (chosen) select.value = chosen;
    const explain = () => {
      $('#train-arguments-help').textContent = choices.find((c) => c.value === select.value)?.explain || '';
    };
    select.onchange = explain;
    explain();
  }

  // What a score model reads beside each answer (`--score-input`) is the score task's choice only.
  const showScoreInput = () => {
    $('#train-score-input-label').hidden = $('#train-task').value !== 'score';
  };
  $('#train-task').addEventListener('change', showScoreInput);

  function showChoices(choices) {
    const tasks = $('#train-task');
    for (const option of tasks.options) option.disabled = !choices.tasks.includes(option.value);
    if (!choices.tasks.includes(tasks.value)) tasks.value = choices.tasks[0];
    showScoreInput();
    showArguments(choices.arguments, choices.default_argument);
    const what = {
      bundle: 'instances, argument bundle',
      hitz: 'instances, HiTZ MCQA file (the argument is in the question)',
      rubric: 'responses, rubric file (the criteria judged by met or met_by train a grader for the Grade step)',
      metrics: `scored candidates, metrics JSONL file (a metric learned from the human scores: ${choices.dimensions?.join(', ')})`,
    }[choices.format];
    $('#train-file-info').textContent =
      `${choices.instances} ${what}` +
      (choices.systems.length ? `; systems: ${choices.systems.join(', ')}` : '') +
      `; tasks: ${choices.tasks.join(', ')}`;
  }

  function devChoice() {
    return document.querySelector('input[name=train-dev]:checked').value;
  }

  function updateButton() {
    const devOk = devChoice() === 'split' || !!form.dev;
    $('#train-run').disabled = !!ctx.state.running || !form.train || !form.choices || !devOk;
  }

  /** The base encoder: the model chosen above when it is a model folder or a Hub id, else the
   *  bundled one. */
  function baseModel() {
    const chosen = ctx.selectedModel();
    return ['bundled', 'local', 'hub'].includes(chosen.source) ? chosen : { source: 'bundled' };
  }

  /** The form as `medrank train`'s flags name it (`page::training` reads it so); where the
   *  model runs is the Model section's choice. */
  function request() {
    const split = devChoice() === 'split';
    const out = { train: form.train, dev: split ? undefined : form.dev };
    for (const field of document.querySelectorAll('[data-train]')) {
      // An empty number is the recipe's (or the default): left out, as a flag not given.
      if (field.type === 'number' && field.value.trim() === '') continue;
      if (field.id === 'train-score-input' && $('#train-task').value !== 'score') continue;
      out[field.dataset.train] = field.type === 'number' ? Number(field.value) : field.value;
    }
    if (!split) delete out.dev_split;
    out.backend = document.querySelector('[data-option=backend]').value;
    return out;
  }

  async function train() {
    if (ctx.state.running) return;
    hideError();
    const req = request();
    const curve = [];
    const started = performance.now();
    ctx.state.running = { job: 'train', started };
    ctx.updateRunButtons();
    updateButton();
    $('#train-cancel').hidden = false;
    $('#train-progress').hidden = false;
    $('#train-notes').replaceChildren();
    $('#train-chart').replaceChildren();
    $('#train-result').textContent = '';
    // The dev metric that picks the epoch and the dev baseline (the summary names them): the
    // curve draws both.
    let metric = 'accuracy';
    let baseline = null;
    const drawCurve = (points, extra = {}) =>
      $('#train-chart').replaceChildren(trainingCurve(points, { epochs: req.epochs, metric, baseline, ...extra }));
    const onProgress = (p) => {
      if (p.summary) {
        metric = METRIC_NAMES[p.summary.select_by] ?? p.summary.select_by;
        baseline = curveBaseline(p.summary.baseline);
        showSummary(p.summary);
      }
      if (p.epoch) {
        curve.push(p.epoch);
        drawCurve(curve);
      }
      // Once the trained part is placed on the GPU: what it holds there, before training.
      if (p.gpuMemory && !$('#train-gpu-memory')) {
        $('#train-notes').append(
          el(
            'div',
            { id: 'train-gpu-memory' },
            `The trained layers run on the GPU (WebGPU); they need ${p.gpuMemory}.`,
          ),
        );
      }
      showProgress(p);
    };
    try {
      const reply = await ctx.ask(
        { type: 'train', model: baseModel(), request: req, name: $('#train-name').value },
        onProgress,
      );
      const { report, outcome, stored, notStored, backend, trainedOn } = reply.result;
      ctx.state.lastTraining = {
        request: req,
        report,
        outcome,
        stored,
        notStored: notStored && { reason: notStored.reason, name: notStored.name },
        backend,
        trainedOn,
        featuresMs: reply.featuresMs,
        elapsedMs: reply.elapsedMs,
      };
      metric = METRIC_NAMES[report.select_by] ?? report.select_by;
      baseline = curveBaseline(outcome.baseline);
      drawCurve(report.curve, {
        best: report.best_epoch,
        stopped: outcome.stopped_at != null ? { epoch: outcome.stopped_at, text: outcome.stopped_text } : null,
      });
      // A score model has no accuracy: its quadratic kappa stands beside Spearman.
      const bestScores = report.curve[report.best_epoch - 1]?.dev_scores;
      const sentences = [
        `Best epoch ${report.best_epoch}: dev ${metric} ${report.best_dev_metric.toFixed(4)}` +
          (bestScores
            ? ` (dev kappa ${figure(bestScores.kappa)})`
            : metric === 'accuracy'
              ? ''
              : ` (dev accuracy ${report.best_dev_accuracy.toFixed(4)})`) +
          (outcome.stopped_text ? `; ${outcome.stopped_text}` : '') +
          '.',
        outcome.baseline_text && `Beside it, ${outcome.baseline_text}.`,
        ...report.warnings.map((w) => `Warning: ${w}.`),
        `Features computed on ${describeBackend(backend)}` +
          (report.trained_layers === 0
            ? '.'
            : `; the trained layers ran on ${trainedOn === 'gpu' ? 'the GPU (WebGPU)' : 'the CPU (WebAssembly)'}.`) +
          (backend.fallback_reason && backend.in_words ? ` ${backend.in_words}` : ''),
        stored
          ? report.quality.untrusted
            ? `Kept in this browser as “${stored.name}” but not chosen as the model above: its results are not to be trusted (${report.quality.untrusted}).`
            : `Kept in this browser as “${stored.name}” and chosen as the model above.`
          : `This browser refused to keep it (${notStored.reason}): download it now, it is not kept after this page closes.`,
        report.truncation_warning && `Note: ${report.truncation_warning}.`,
      ];
      $('#train-result').replaceChildren(
        ...(report.curve.some((e) => e.dev_scores) ? [scoreEpochs(report.curve, report.best_epoch)] : []),
        ...(outcome.baseline_warning
          ? [el('p', { class: 'train-baseline-warning' }, `Warning: ${outcome.baseline_warning}.`)]
          : []),
        sentences.filter(Boolean).join(' '),
        // The engine's own reason the GPU was not used, folded.
        ...(backend.fallback_reason
          ? [' ', el('details', { class: 'detail' }, el('summary', {}, 'Technical detail'), backend.fallback_reason)]
          : []),
        ...(notStored ? [' ', downloadButton(notStored.name, notStored.files)] : []),
      );
      await refreshTrained();
      // A model no better than what learns nothing is kept, never picked for the user.
      const radio =
        stored &&
        !report.quality.untrusted &&
        document.querySelector(`input[name=model][value="trained:${stored.id}"]`);
      if (radio) radio.checked = true;
      ctx.announce(`Training finished in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    } catch (error) {
      if (error?.cancelled) showError({ message: 'Training cancelled: nothing was kept.' });
      else showError(error);
    } finally {
      ctx.state.running = null;
      $('#train-cancel').hidden = true;
      $('#train-progress').hidden = true;
      ctx.updateRunButtons();
      updateButton();
    }
  }

  /** A figure that may be undefined (null: kappa of scores that are not whole numbers). */
  function figure(v) {
    return v == null ? 'undefined' : v.toFixed(4);
  }

  /** A score model's dev figures per epoch: Spearman (which picks the epoch) with
   *  quadratic kappa beside it, as `medrank train --task score` prints them. */
  function scoreEpochs(curve, best) {
    return el(
      'ol',
      { id: 'train-score-epochs' },
      ...curve.map((e) =>
        el(
          'li',
          {
            'data-epoch': e.epoch,
            'data-spearman': e.dev_scores?.spearman ?? '',
            'data-kappa': e.dev_scores?.kappa ?? '',
          },
          `Epoch ${e.epoch}: dev Spearman ${figure(e.dev_scores?.spearman)}, dev kappa ${figure(e.dev_scores?.kappa)}` +
            (e.epoch === best ? ' (picked)' : ''),
        ),
      ),
    );
  }

  /** Where the features were computed; why the GPU was not used is said after the
   *  sentences, in the engine's words, its technical reason folded. */
  function describeBackend(b) {
    return b.backend === 'gpu' ? `the GPU (WebGPU: ${b.device.trim() || 'unnamed adapter'})` : 'the CPU (WebAssembly)';
  }

  /** The summary's or outcome's baseline as the curve draws it. */
  function curveBaseline(b) {
    if (!b) return null;
    return { value: b.metric, label: b.kind === 'majority' ? `majority class (${b.label})` : 'chance' };
  }

  function showSummary(s) {
    const line = (text) => el('div', {}, text);
    // A note on many instances: its sentence, their ids in a disclosure (issue 28: hundreds
    // of ids inline).
    const note = (n) =>
      n.ids.length
        ? el(
            'div',
            {},
            `Note: ${n.text}.`,
            el(
              'details',
              { class: 'train-ids' },
              el('summary', {}, `${n.ids.length} instance ${n.ids.length === 1 ? 'id' : 'ids'}`),
              el('p', {}, n.ids.join(', ')),
            ),
          )
        : line(`Note: ${n.text}`);
    $('#train-notes').replaceChildren(
      line(
        `${s.train_examples} training and ${s.dev_examples} dev examples` +
          (s.dev_split != null ? ` (a ${s.dev_split} split of the training file)` : '') +
          `; ${s.inputs} inputs through the frozen encoder.`,
      ),
      ...(s.baseline_text ? [line(`Baseline: ${s.baseline_text}.`)] : []),
      ...s.warnings.map((w) => line(`Warning: ${w}`)),
      ...s.notes.map(note),
    );
  }

  /** A progress report of the worker (`page::training::TrainProgress` for the training's
   *  own steps): its stage, the stage's count, the time left for the whole training. */
  function showProgress(p) {
    if (!p.stage) return;
    $('#train-stage').textContent = p.stage;
    const bar = $('#train-bar');
    if (p.total > 0) {
      bar.max = p.total;
      bar.value = p.done;
      $('#train-count').textContent = `${p.done} / ${p.total}`;
    } else {
      bar.removeAttribute('value');
      $('#train-count').textContent = '';
    }
    $('#train-eta').textContent = p.left ? p.left.text : '';
  }

  /** An error; an option the engine refused (`error.option`, its key) is said after the
   *  form's field ("Epochs: 0: expected ..."), where the CLI names its flag. */
  function showError(error) {
    const field = error?.option && document.querySelector(`[data-train="${error.option}"]`);
    const label = field?.closest('label')?.firstChild?.textContent.trim();
    const box = $('#train-error');
    box.replaceChildren(formatError(label ? { ...error, message: `${label}: ${error.message}` } : error));
    box.hidden = false;
  }
  function hideError() {
    $('#train-error').hidden = true;
  }

  /** A kept evaluator's dev figure: the metric that picked its epoch (its measured quality,
   *  jobs::quality), and whether its results are to be trusted; an evaluator kept before
   *  the quality was recorded has its dev accuracy only. */
  function trainedFigure(m) {
    const q = m.quality;
    if (!q) return `dev accuracy ${m.best_dev_accuracy.toFixed(3)}`;
    return `dev ${q.metric} ${q.dev_metric.toFixed(3)}` + (q.untrusted ? ' — not to be trusted' : '');
  }

  /** Lists the kept evaluators, here and as model choices. */
  async function refreshTrained() {
    let list = [];
    try {
      list = (await ctx.ask({ type: 'trained-list' })).result;
    } catch {
      return;
    }
    const checked = document.querySelector('input[name=model]:checked')?.value;
    $('#trained-models').replaceChildren(
      ...list.map((m) =>
        el(
          'label',
          {},
          el('input', { type: 'radio', name: 'model', value: `trained:${m.id}`, 'data-label': m.name }),
          ` Trained in this browser: `,
          el('code', {}, m.name),
          ` (${m.task}, ${trainedFigure(m)})`,
        ),
      ),
    );
    for (const radio of document.querySelectorAll('#trained-models input')) {
      if (radio.value === checked) radio.checked = true;
      radio.addEventListener('change', ctx.updateRunButtons);
    }
    if (!document.querySelector('input[name=model]:checked'))
      document.querySelector('input[name=model][value=predictions]').checked = true;
    $('#trained-list').replaceChildren(
      ...list.map((m) => {
        const get = el('button', { type: 'button', class: 'secondary', 'data-download': m.id }, 'Download (.zip)');
        get.addEventListener('click', () => downloadTrained(m.id));
        const del = el('button', { type: 'button', class: 'secondary', 'data-delete': m.id }, 'Delete');
        del.addEventListener('click', async () => {
          await ctx.ask({ type: 'trained-delete', trainedId: m.id });
          await refreshTrained();
          ctx.updateRunButtons();
        });
        return el(
          'li',
          { 'data-id': m.id },
          el('code', {}, m.name),
          ` — ${m.task}${m.task === 'score' ? '' : `, arguments ${m.arguments}`}${m.freeze ? `, trained ${m.freeze}` : ''}, best epoch ${m.best_epoch} by ${trainedFigure(m)}, on ${m.base}, ${m.created.slice(0, 16).replace('T', ' ')} `,
          get,
          ' ',
          del,
        );
      }),
    );
    if (!list.length) $('#trained-list').append(el('li', { class: 'muted' }, 'none yet'));
  }

  /** The evaluator's model folder in a .zip: `medrank evaluate --model <unzipped folder>`. */
  async function downloadTrained(id) {
    const { meta, files } = (await ctx.ask({ type: 'trained-files', trainedId: id })).result;
    downloadFolder(meta.name, files);
  }

  function downloadFolder(name, files) {
    const folder = name.replace(/[^A-Za-z0-9._-]+/g, '-');
    const entries = ['config.json', 'tokenizer.json', 'model.safetensors', 'train_log.json'].map((f) => [
      `${folder}/${f}`,
      files[f],
    ]);
    download(`${folder}.zip`, zipStored(entries), 'application/zip');
  }

  /** A button that downloads an evaluator the browser would not keep (its files in memory). */
  function downloadButton(name, files) {
    const button = el('button', { type: 'button', id: 'train-download-unkept' }, 'Download it (.zip)');
    button.addEventListener('click', () => downloadFolder(name, files));
    return button;
  }

  ctx.state.workerReady.then(refreshTrained);
  return { refreshTrained, updateButton };
}
