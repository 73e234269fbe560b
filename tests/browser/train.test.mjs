// Training an evaluator in the page: the same data, seed and split give `medrank train
// --freeze head`'s loss and dev accuracy curve (within 1e-4: the frozen features come from
// the wasm CPU path here, from the native one there); the evaluator ranks a bundle at once;
// its .zip, unzipped, is a model folder `medrank evaluate --model` loads and gives the
// page's probabilities (within 1e-5); it is kept across a reload; a cancelled training keeps
// nothing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, readdirSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp, upload, run, setOptions, cli, cliTrain, pageTrain, firstLines as writeFirstLines, DEFAULT_MODEL as MODEL, haveDefaultModel as haveModel, ROOT, EXAMPLES } from './harness.mjs';
import { writeRandomBert } from './random-model.mjs';

const work = mkdtempSync(join(tmpdir(), 'medrank-train-page-'));

/** Writes the first `n` lines of the JSON Lines file `src` to `name` in the work folder;
 *  returns its path (a smaller training set, for the slow cases). */
const firstLines = (src, n, name) => writeFirstLines(src, n, join(work, name));

// MCQA: the first 40 CasiMedicos training items (a HiTZ file: the argument is already in the
// question). Misinformation: the fixture bundle (tests/fixtures/train_misinfo/make.py: a
// not_enough_evidence instance or two, an MCQA instance among them, a system missing on some
// instances, non-ASCII text), one random system's argument per instance.
const mcqaFile = firstLines(join(ROOT, 'data/casimedicos/train.jsonl'), 40, 'casimedicos-40.jsonl');
const CASES = {
  mcqa: {
    file: mcqaFile,
    task: 'mcqa',
    arguments: 'none',
    settings: { epochs: 4, lr: 0.001, batch: 8, patience: 4, seed: 7, split: 0.25 },
  },
  misinformation: {
    file: join(ROOT, 'tests/fixtures/train_misinfo/bundle.jsonl'),
    task: 'misinformation',
    arguments: 'random:expert,gpt-4o,llama-3-70b',
    settings: { epochs: 6, lr: 0.01, batch: 8, patience: 6, seed: 3, split: 0.25 },
  },
};

let app;
before(async () => {
  if (haveModel) app = await openApp();
});
after(async () => {
  await app?.close();
  // The work folder holds trained models and a 440 MB base-size checkpoint.
  rmSync(work, { recursive: true, force: true });
});

/** (instance, system) -> probs by label, from `medrank evaluate --save-predictions` CSV. */
function cliPredictions(csvPath) {
  const [head, ...rows] = readFileSync(csvPath, 'utf8').trim().split('\n');
  const cols = head.split(',');
  const out = new Map();
  for (const row of rows) {
    const cells = row.split(',');
    const get = (c) => cells[cols.indexOf(c)];
    const probs = Object.fromEntries(
      cols.filter((c) => c.startsWith('prob:')).map((c) => [c.slice(5), Number(get(c))]),
    );
    out.set(`${get('instance')}|${get('system')}`, { p_correct: Number(get('p_correct')), probs });
  }
  return out;
}

/** The same from the page's ranking reply (its drill-down view). */
function pagePredictions(result) {
  const out = new Map();
  for (const inst of result.instances)
    for (const arg of inst.arguments)
      for (const p of arg.predictions)
        out.set(`${inst.id}|${arg.system}`, { p_correct: p.p_correct, probs: Object.fromEntries(p.probs) });
  return out;
}

/** The imbalanced misinformation fixture (tests/fixtures/train_imbalanced) as a training
 *  case: `freeze` and `epochs` as the test needs. */
function imbalancedCase(freeze, epochs) {
  const fx = join(ROOT, 'tests/fixtures/train_imbalanced');
  return {
    file: join(fx, 'train.jsonl'),
    dev: join(fx, 'dev.jsonl'),
    task: 'misinformation',
    arguments: 'none',
    freeze,
    settings: { epochs, lr: 0.001, batch: 8, patience: 1, seed: 5, split: 0.2 },
  };
}

for (const [key, c] of Object.entries(CASES)) {
  test(
    `${key}: the page trains the head to the CLI's curve, ranks with it, and its .zip loads in the CLI`,
    { skip: !haveModel && 'no default model: run scripts/setup.sh model, then scripts/build-web.sh' },
    async () => {
      const { page } = app;
      const cliLog = cliTrain(c, join(work, `cli-${key}`));
      const trained = await pageTrain(page, c, `page-${key}`);
      const { report, stored } = trained;
      assert.equal(trained.backend.backend, 'cpu');
      // The curve, epoch by epoch (early stopping and the best epoch included).
      assert.equal(report.curve.length, cliLog.curve.length, JSON.stringify(report.curve));
      report.curve.forEach((e, i) => {
        const want = cliLog.curve[i];
        assert.ok(
          Math.abs(e.train_loss - want.train_loss) <= 1e-4,
          `epoch ${i + 1} loss ${e.train_loss} vs ${want.train_loss}`,
        );
        assert.ok(
          Math.abs(e.dev_accuracy - want.dev_accuracy) <= 1e-4,
          `epoch ${i + 1} dev accuracy ${e.dev_accuracy} vs ${want.dev_accuracy}`,
        );
        assert.ok(
          Math.abs(e.dev_metric - want.dev_metric) <= 1e-4,
          `epoch ${i + 1} dev metric ${e.dev_metric} vs ${want.dev_metric}`,
        );
        assert.deepEqual(e.dev_confusion, want.dev_confusion, `epoch ${i + 1} confusion`);
        assert.equal(e.steps, want.steps);
      });
      assert.equal(report.best_epoch, cliLog.best_epoch);
      // The epoch is picked by the task's metric (macro-F1 for classification), and the
      // curve draws that metric.
      assert.equal(report.select_by, cliLog.select_by);
      assert.equal(report.select_by, key === 'mcqa' ? 'accuracy' : 'macro_f1');
      const metricName = key === 'mcqa' ? 'accuracy' : 'macro-F1';
      assert.equal(
        await page.getAttribute('#train-chart svg', 'aria-label'),
        `Training curve: train loss and dev ${metricName} per epoch`,
      );
      assert.match(
        await page.textContent('#train-result'),
        new RegExp(`dev ${metricName} ${report.best_dev_metric.toFixed(4)}`),
      );
      assert.ok(Math.abs(report.best_dev_accuracy - cliLog.best_dev_accuracy) <= 1e-4);
      // Something was learnt: the best dev accuracy beats the first epoch's or chance.
      assert.ok(report.best_dev_accuracy > (key === 'mcqa' ? 0.2 : 0.5), `${report.best_dev_accuracy}`);
      assert.equal(stored.name, `page-${key}`);

      // It is the page's model now: rank the example bundle with it (its other tasks are
      // left out with a warning).
      assert.equal(await page.inputValue('input[name=model]:checked'), `trained:${stored.id}`);
      await page.evaluate(() => {
        window.medrank.state.files = [];
      });
      await upload(page, ['bundle.jsonl']);
      // Every control the inputs allow, as the CLI's bare --controls.
      await setOptions(page, { controls: 'all' });
      await run(page, '#run-rank_systems');
      const ranked = await page.evaluate(() => window.medrank.state.lastResult.result);
      assert.equal(ranked.report.evaluators.length, 1);
      assert.deepEqual(
        ranked.report.evaluators[0].report.tasks.map((t) => t.task),
        [c.task],
      );

      // The download: a .zip holding the model folder; the CLI loads it and predicts the same.
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.click(`button[data-download="${stored.id}"]`),
      ]);
      const zip = join(work, `${key}.zip`);
      await download.saveAs(zip);
      const unzipped = join(work, `unzipped-${key}`);
      execFileSync('python3', ['-m', 'zipfile', '-e', zip, unzipped]);
      const folder = join(unzipped, `page-${key}`);
      assert.deepEqual(readdirSync(folder).sort(), [
        'config.json',
        'model.safetensors',
        'tokenizer.json',
        'train_log.json',
      ]);
      const zipLog = JSON.parse(readFileSync(join(folder, 'train_log.json'), 'utf8'));
      assert.deepEqual(
        zipLog.curve.map((e) => e.train_loss),
        report.curve.map((e) => e.train_loss),
      );
      assert.equal(zipLog.dev_split, c.settings.split);
      assert.equal(zipLog.task, c.task);
      const csv = join(work, `predictions-${key}.csv`);
      cli([
        'evaluate',
        '--model',
        folder,
        '--bundle',
        join(EXAMPLES, 'bundle.jsonl'),
        '--controls',
        '--seed',
        '0',
        '--save-predictions',
        csv,
        '--quiet',
      ]);
      const fromCli = cliPredictions(csv);
      const fromPage = pagePredictions(ranked);
      const bundleSystems = ['expert', 'gpt-4o', 'llama-3-70b', 'openbiollm-70b'];
      let compared = 0;
      for (const [k, want] of fromCli) {
        const got = fromPage.get(k);
        if (!got && !bundleSystems.includes(k.split('|')[1])) continue; // a control only one side added
        assert.ok(got, `the page has no prediction for ${k}`);
        assert.ok(
          Math.abs(got.p_correct - want.p_correct) <= 1e-5,
          `${k}: p_correct ${got.p_correct} vs ${want.p_correct}`,
        );
        for (const [label, p] of Object.entries(want.probs))
          if (label in got.probs)
            assert.ok(Math.abs(got.probs[label] - p) <= 1e-5, `${k}: ${label} ${got.probs[label]} vs ${p}`);
        compared++;
      }
      assert.ok(compared >= 3 * bundleSystems.length, `compared ${compared} predictions`);
    },
  );
}

test(
  'the training form starts at the arguments the file carries, each choice explained in a line; the list names the metric that picked the epoch',
  { skip: !haveModel && 'no default model' },
  async () => {
    const { page } = app;
    // A HiTZ file carries no argument: none is its only choice. (Picked first: the form
    // reads a file again only when the pick changes.)
    await page.setInputFiles('#train-file', mcqaFile);
    await page.waitForFunction(() => /HiTZ/.test(document.querySelector('#train-file-info').textContent));
    assert.equal(await page.inputValue('#train-arguments'), 'none');
    await page.setInputFiles('#train-file', CASES.misinformation.file);
    await page.waitForFunction(() => /argument bundle/.test(document.querySelector('#train-file-info').textContent));
    // The expert's argument first and chosen; the baseline evaluator one choice, last.
    const choices = await page.$$eval('#train-arguments option', (os) => os.map((o) => o.value));
    assert.deepEqual(choices, [
      'system:expert',
      'system:gpt-4o',
      'system:llama-3-70b',
      'random:expert,gpt-4o,llama-3-70b',
      'none',
    ]);
    assert.equal(await page.inputValue('#train-arguments'), 'system:expert');
    assert.equal(
      await page.textContent('#train-arguments-help'),
      "the expert's argument on every instance: the evaluator learns to read a sound argument, so a ranking with it tells the systems' arguments apart by what they give it",
    );
    await page.selectOption('#train-arguments', 'none');
    assert.equal(
      await page.textContent('#train-arguments-help'),
      "no argument: the evaluator learns from the question alone and never learns to read an argument, so a ranking with it cannot tell good arguments from bad (the paper's baseline, to compare against)",
    );
    // The evaluators trained above are listed by the metric that picked their epoch.
    const labels = await page.$$eval('#trained-models label', (ls) => ls.map((l) => l.textContent.trim()));
    for (const label of labels)
      assert.match(label, /^Trained in this browser: \S+ \((mcqa, dev accuracy|misinformation, dev macro-F1) \d\.\d{3}( — not to be trusted)?\)$/);
  },
);

test(
  'trained evaluators are kept across a reload; a cancelled training keeps nothing',
  { skip: !haveModel && 'no default model' },
  async () => {
    const { page } = app;
    const kept = async () => page.$$eval('#trained-list li[data-id]', (items) => items.map((li) => li.dataset.id));
    const cached = () => page.evaluate(async () => (await (await caches.open('medrank-trained-v1')).keys()).length);
    // The two evaluators trained above (or one, when running this test alone: train one).
    if ((await kept()).length === 0) await pageTrain(page, CASES.mcqa, 'page-mcqa');
    const before = await kept();
    const files = await cached();
    assert.equal(files, before.length * 5, 'four files and a meta.json each');
    await page.reload();
    await page.waitForFunction(
      (n) => document.querySelectorAll('#trained-list li[data-id]').length === n,
      before.length,
      { timeout: 60000 },
    );
    assert.deepEqual(await kept(), before);
    for (const id of before) assert.equal(await page.locator(`input[name=model][value="trained:${id}"]`).count(), 1);

    // Cancel once the first epochs are logged: the worker sees the message between two steps.
    const long = { ...CASES.mcqa, settings: { ...CASES.mcqa.settings, epochs: 400, patience: 400 } };
    const training = pageTrain(page, long, 'cancelled').then(
      () => null,
      (e) => e,
    );
    await page.waitForFunction(
      () => /^Epoch \d+ of 400: /.test(document.querySelector('#train-stage').textContent),
      null,
      { timeout: 300000 },
    );
    await page.click('#train-cancel');
    const error = await training;
    assert.match(String(error), /Training cancelled: nothing was kept/);
    assert.deepEqual(await kept(), before);
    assert.equal(await cached(), files);
    // The page works on: the run buttons are back.
    assert.equal(await page.evaluate(() => window.medrank.state.running), null);

    // Bad input: a HiTZ MCQA dev file for a misinformation head is refused, naming the file;
    // nothing is kept.
    const refused = await pageTrain(page, { ...CASES.misinformation, dev: mcqaFile }, 'refused').then(
      () => null,
      (e) => e,
    );
    assert.match(String(refused), /casimedicos-40\.jsonl.*HiTZ file is MCQA/);
    assert.deepEqual(await kept(), before);
  },
);

// The first 24 lines of the misinformation fixture (the MCQA line and two not_enough_evidence
// instances among them): all 49 took 1.5-2 minutes on SwiftShader.
test(
  'on WebGPU (SwiftShader) the frozen features come from the GPU; the curve stays within 1e-3 of the CLI’s',
  { skip: !haveModel && 'no default model' },
  async () => {
    const c = { ...CASES.misinformation, file: firstLines(CASES.misinformation.file, 24, 'misinformation-24.jsonl') };
    const cliLog = cliTrain(c, join(work, 'cli-misinformation-24'));
    const gpuApp = await openApp({ webgpu: true });
    try {
      const trained = await pageTrain(gpuApp.page, c, 'page-misinformation-webgpu', 'gpu');
      assert.equal(trained.backend.backend, 'gpu', JSON.stringify(trained.backend));
      const { report } = trained;
      assert.equal(report.curve.length, cliLog.curve.length);
      // The GPU's sums run in another order (features within ~1e-5): the losses follow.
      report.curve.forEach((e, i) => {
        const want = cliLog.curve[i];
        assert.ok(
          Math.abs(e.train_loss - want.train_loss) <= 1e-3,
          `epoch ${i + 1} loss ${e.train_loss} vs ${want.train_loss}`,
        );
      });
      assert.match(await gpuApp.page.textContent('#train-result'), /Features computed on the GPU \(WebGPU/);
    } finally {
      await gpuApp.close();
    }
  },
);

// Fine-tuning in the page: the top layer and the head train on WebGPU (SwiftShader here)
// through the WGSL backward kernels and AdamW, from the frozen layers' states computed on
// the GPU; the CLI trains the same top layer with candle's autograd on the CPU. NLI, whose
// label is in the argument only: the first 8 training and 4 dev examples of the fixture of
// tests/integration/train_top_layers.rs, two steps of 4 per epoch (all 88 took 4-7 minutes on
// SwiftShader, 16 and 8 about a minute, most of it the frozen pass; the curve's comparison
// needs a few steps, not many).
test(
  'top:1 fine-tuning on WebGPU (SwiftShader) gives the CPU trainer’s curve within 1e-3',
  { skip: !haveModel && 'no default model' },
  async () => {
    const fx = join(ROOT, 'tests/fixtures/train_nli');
    const c = {
      file: firstLines(join(fx, 'train.jsonl'), 8, 'nli-train-8.jsonl'),
      dev: firstLines(join(fx, 'dev.jsonl'), 4, 'nli-dev-4.jsonl'),
      task: 'nli',
      arguments: 'system:informative',
      freeze: 'top:1',
      settings: { epochs: 2, lr: 0.01, batch: 4, patience: 2, seed: 5, split: 0.2 },
    };
    const cliLog = cliTrain(c, join(work, 'cli-nli-top1'));
    const gpuApp = await openApp({ webgpu: true });
    try {
      const trained = await pageTrain(gpuApp.page, c, 'page-nli-top1-webgpu', 'gpu');
      assert.equal(trained.trainedOn, 'gpu', 'the trained layer ran on the GPU');
      const { report } = trained;
      assert.equal(report.curve.length, cliLog.curve.length);
      report.curve.forEach((e, i) => {
        const want = cliLog.curve[i];
        assert.ok(
          Math.abs(e.train_loss - want.train_loss) <= 1e-3,
          `epoch ${i + 1} loss ${e.train_loss} vs ${want.train_loss}`,
        );
        assert.equal(e.dev_accuracy, want.dev_accuracy, `epoch ${i + 1} dev accuracy`);
        assert.equal(e.steps, want.steps);
      });
      // The loss moved: the comparison is not of two constants.
      assert.notEqual(report.curve[0].train_loss, report.curve[1].train_loss);
      assert.match(await gpuApp.page.textContent('#train-result'), /the trained layers ran on the GPU \(WebGPU\)/);
    } finally {
      await gpuApp.close();
    }
  },
);

// Issue 25: the whole encoder, its embeddings too, fine-tuned on WebGPU in the page (the
// GPU trainer from token ids: embedding gather and norm, every layer, the embedding tables'
// gradients), against `medrank train --freeze all` (candle's autograd on the CPU). A tiny
// random BERT (hidden 32, 2 layers; the default tokenizer's vocabulary) picked from disk
// keeps SwiftShader's share short; the NLI slice of the top:1 test.
test(
  'every layer and the embeddings fine-tuned on WebGPU (SwiftShader) give `medrank train --freeze all`’s curve within 1e-3',
  { skip: !haveModel && 'no default model' },
  async () => {
    const files = writeRandomBert(join(work, 'tiny-bert'), join(MODEL, 'tokenizer.json'), {
      layers: 2,
      hidden: 32,
      heads: 4,
      seed: 11,
    });
    const fx = join(ROOT, 'tests/fixtures/train_nli');
    const c = {
      model: join(work, 'tiny-bert'),
      file: firstLines(join(fx, 'train.jsonl'), 16, 'nli-train-16.jsonl'),
      dev: firstLines(join(fx, 'dev.jsonl'), 8, 'nli-dev-8.jsonl'),
      task: 'nli',
      arguments: 'system:informative',
      freeze: 'all',
      settings: { epochs: 3, lr: 0.01, batch: 8, patience: 3, seed: 5, split: 0.2 },
    };
    const cliLog = cliTrain(c, join(work, 'cli-nli-all'));
    const gpuApp = await openApp({ webgpu: true });
    try {
      await gpuApp.page.setInputFiles('#model-files', files);
      const trained = await pageTrain(gpuApp.page, c, 'page-nli-all-webgpu', 'gpu');
      assert.equal(trained.trainedOn, 'gpu', 'every layer ran on the GPU');
      const { report } = trained;
      assert.equal(report.curve.length, cliLog.curve.length);
      report.curve.forEach((e, i) => {
        const want = cliLog.curve[i];
        assert.ok(
          Math.abs(e.train_loss - want.train_loss) <= 1e-3,
          `epoch ${i + 1} loss ${e.train_loss} vs ${want.train_loss}`,
        );
        assert.ok(Math.abs(e.dev_loss - want.dev_loss) <= 1e-3, `epoch ${i + 1} dev loss ${e.dev_loss} vs ${want.dev_loss}`);
        assert.equal(e.dev_accuracy, want.dev_accuracy, `epoch ${i + 1} dev accuracy`);
        assert.equal(e.steps, want.steps);
      });
      // The loss moved: the comparison is not of two constants.
      assert.notEqual(report.curve[0].train_loss, report.curve[2].train_loss);
      // What the GPU holds was shown before the first step.
      assert.match(
        await gpuApp.page.textContent('#train-gpu-memory'),
        /^The trained layers run on the GPU \(WebGPU\); they need [\d.]+ MiB on the GPU: [\d.]+ MiB for the trained weights/,
      );
      assert.match(await gpuApp.page.textContent('#train-result'), /the trained layers ran on the GPU \(WebGPU\)/);
    } finally {
      await gpuApp.close();
    }
  },
);

// Issue 25: the paper's recipe at its size, a base-size encoder (BERT-base shape: 12
// layers of 768, 110M parameters, random weights) fine-tuned end to end on WebGPU in the
// page: one step on SwiftShader, or a refusal that names the memory it needs.
test(
  'a base-size random BERT fine-tunes every layer for one step on WebGPU, or is refused with the memory it needs',
  { skip: !haveModel && 'no default model' },
  async (t) => {
    const files = writeRandomBert(join(work, 'base-bert'), join(MODEL, 'tokenizer.json'), {
      layers: 12,
      hidden: 768,
      heads: 12,
      seed: 12,
      scale: 0.02,
    });
    // One step of two pairs of a few tokens each: what is tested is the size of the model,
    // and on SwiftShader a step of BERT-base took ~80 s with the NLI fixture's ~80 tokens per
    // pair, ~45 s with these 15 (the rest is AdamW and the gradients of 110M parameters).
    const nli = (name, rows) => {
      const out = join(work, name);
      const line = ([id, statement, evidence, label, argument]) =>
        JSON.stringify({ id, task: 'nli', statement, evidence, label, arguments: { informative: argument } });
      writeFileSync(out, rows.map(line).join('\n') + '\n');
      return out;
    };
    const c = {
      file: nli('nli-train-2.jsonl', [
        ['t1', 'Aspirin allowed.', 'Aspirin allowed.', 'entailment', 'True.'],
        ['t2', 'Statins banned.', 'Statins allowed.', 'contradiction', 'False.'],
      ]),
      dev: nli('nli-dev-2.jsonl', [
        ['d1', 'Warfarin allowed.', 'Warfarin allowed.', 'entailment', 'True.'],
        ['d2', 'Digoxin banned.', 'Digoxin allowed.', 'contradiction', 'False.'],
      ]),
      task: 'nli',
      arguments: 'system:informative',
      freeze: 'all',
      settings: { epochs: 1, lr: 0.001, batch: 2, patience: 1, seed: 5, split: 0.2 },
    };
    const gpuApp = await openApp({ webgpu: true });
    try {
      await gpuApp.page.setInputFiles('#model-files', files);
      let trained = null;
      let refusal = null;
      try {
        trained = await pageTrain(gpuApp.page, c, 'page-nli-base-webgpu', 'gpu');
      } catch (e) {
        refusal = e.message;
      }
      const memory = await gpuApp.page.textContent('#train-gpu-memory');
      t.diagnostic(`${memory} ${refusal ? `Refused: ${refusal}` : `Trained: ${JSON.stringify(trained.report.curve[0])}`}`);
      if (trained) t.diagnostic(trained.stored ? 'kept in the browser' : `not kept: ${trained.notStored.reason}`);
      // Parameters by hand: 12 layers of 4 x 768^2 + 2 x 768 x 3072 + 9 x 768 + 3072 =
      // 7,087,872 values, the pooler and the 2-label NLI classifier 590,592 + 1,538, the
      // embeddings (30522 + 512 + 2) x 768 + 1,536 = 23,837,184: 109,483,778 values, five
      // f32 copies each (value, gradient, two moments, best): 2,189,675,560 bytes = 2.0 GiB.
      assert.match(memory, /they need [\d.]+ GiB on the GPU: 2\.0 GiB for the trained weights/, memory);
      if (refusal) {
        assert.match(refusal, /could not hold the trained tensors: 2\.0 GiB/, refusal);
      } else {
        assert.equal(trained.trainedOn, 'gpu');
        assert.equal(trained.report.curve.length, 1);
        assert.equal(trained.report.curve[0].steps, 1);
        assert.ok(Number.isFinite(trained.report.curve[0].train_loss), JSON.stringify(trained.report.curve[0]));
        // 440 MB of weights: a browser may refuse to keep them (Chromium's test profile
        // does); the evaluator is then offered for download instead of lost.
        if (!trained.stored) {
          assert.ok(trained.notStored?.reason, JSON.stringify(trained.notStored));
          assert.match(await gpuApp.page.textContent('#train-result'), /This browser refused to keep it/);
          assert.equal(await gpuApp.page.isVisible('#train-download-unkept'), true);
        }
      }
    } finally {
      await gpuApp.close();
      // 440 MB: gone as soon as the test ends, not with the run (the disk is shared).
      rmSync(join(work, 'base-bert'), { recursive: true, force: true });
    }
  },
);

// Issue 28, the training as a user meets it: top-layer training on an imbalanced fixture
// (tests/fixtures/train_imbalanced/make.py: claims that do not tell their label, no
// argument, a dev file of 6 `refuted` and 2 `supported`) with patience 1, on the CPU. The
// stages are named as they happen, each with the time left for the whole training; the
// chart marks where early stopping ended it and draws the majority-class baseline, whose
// figure (macro-F1 3/7 and accuracy 6/8, worked out in make.py) is in the text too; the 12
// dropped not_enough_evidence ids sit in a disclosure.
test(
  'the stages are named as they happen; the chart marks early stopping and the majority-class baseline; dropped ids sit in a disclosure',
  { skip: !haveModel && 'no default model' },
  async () => {
    const { page } = app;
    const c = imbalancedCase('top:1', 8);
    // Every stage and estimate the page shows, in order (consecutive repeats once).
    await page.evaluate(() => {
      const seen = (window.__trainSeen = []);
      const record = () => {
        const stage = document.querySelector('#train-stage').textContent;
        const left = document.querySelector('#train-eta').textContent;
        const last = seen[seen.length - 1];
        if (!last || last.stage !== stage) seen.push({ stage, lefts: [left] });
        else if (last.lefts[last.lefts.length - 1] !== left) last.lefts.push(left);
      };
      window.__trainObserver = new MutationObserver(record);
      for (const id of ['#train-stage', '#train-eta'])
        window.__trainObserver.observe(document.querySelector(id), {
          childList: true,
          characterData: true,
          subtree: true,
        });
    });
    const trained = await pageTrain(page, c, 'page-imbalanced');
    const seen = await page.evaluate(() => {
      window.__trainObserver.disconnect();
      return window.__trainSeen;
    });
    const { report, outcome } = trained;
    const ran = report.curve.length;

    // The stages: the frozen pass, then each epoch's training and dev evaluation, then the
    // export and the save; the frozen pass's name gone once epoch 1 starts.
    const stages = seen.map((s) => s.stage).filter((s) => s !== 'Working…' && !/^(Loading|Reading) the model/.test(s));
    const want = ['Computing features with the frozen encoder'];
    for (let k = 1; k <= ran; k++) want.push(`Epoch ${k} of 8: training`, `Epoch ${k} of 8: dev evaluation`);
    want.push('Exporting the trained evaluator', 'Saving the evaluator in this browser');
    assert.deepEqual(stages, want, JSON.stringify(seen));
    // Each stage of the training shows the estimate of time left for all of it; an upper
    // bound while early stopping could still skip an epoch (patience 1 of 8 epochs).
    const epoch1 = seen.find((s) => s.stage === 'Epoch 1 of 8: training');
    assert.ok(
      epoch1.lefts.some((l) =>
        /^at most (about \d+ (s|min)|less than a second) left \(early stopping may end it sooner\)$/.test(l),
      ),
      JSON.stringify(epoch1),
    );

    // Early stopping: patience 1 ends the run at the first epoch without a better dev
    // macro-F1; the outcome, the chart's mark and the text say where.
    assert.ok(ran < 8, `ran ${ran} of 8 epochs`);
    assert.equal(outcome.stopped_at, ran);
    assert.equal(outcome.stopped_text, `stopped early at epoch ${ran} of 8: no dev improvement for 1 epoch`);
    assert.equal(await page.getAttribute('#train-chart svg .stopped-early', 'data-epoch'), String(ran));
    assert.match(
      await page.textContent('#train-chart svg .stopped-early'),
      new RegExp(`stopped early at epoch ${ran} of 8`),
    );
    assert.match(await page.textContent('#train-result'), new RegExp(`stopped early at epoch ${ran} of 8`));
    // The axis still runs to the 8 epochs asked for: the run's end is visibly short of it.
    const ticks = await page.$$eval('#train-chart svg > text', (ts) => ts.map((t) => t.textContent));
    assert.ok(ticks.includes('8'), JSON.stringify(ticks));

    // The majority-class baseline, worked out by hand in make.py: always `refuted` scores
    // macro-F1 3/7 and accuracy 6/8 on the dev file.
    assert.equal(outcome.baseline.kind, 'majority');
    assert.equal(outcome.baseline.label, 'refuted');
    assert.ok(Math.abs(outcome.baseline.metric - 3 / 7) < 1e-12, `${outcome.baseline.metric}`);
    assert.equal(outcome.baseline.accuracy, 0.75);
    assert.equal(report.dev_majority_rate, 0.75);
    assert.ok(Math.abs(Number(await page.getAttribute('#train-chart svg .baseline', 'data-value')) - 3 / 7) < 1e-12);
    assert.match(await page.textContent('#train-chart svg .baseline'), /majority class \(refuted\) 0\.4286/);
    const result = await page.textContent('#train-result');
    assert.match(
      result,
      /always predicting `refuted`, the dev set's majority class, scores dev macro-F1 0\.4286 and dev accuracy 0\.7500 \(the majority-class rate\)/,
    );
    assert.match(await page.textContent('#train-notes'), /Baseline: always predicting `refuted`/);
    // The warning appears exactly when the picked epoch is within 0.005 of the baseline or
    // below it.
    const noBetter = report.best_dev_metric <= outcome.baseline.metric + 0.005;
    assert.equal(
      await page.locator('#train-result .train-baseline-warning').count(),
      noBetter ? 1 : 0,
      `${report.best_dev_metric}`,
    );
    if (noBetter)
      assert.match(
        await page.textContent('#train-result .train-baseline-warning'),
        /the majority-class baseline 0\.4286: the model does no better than always predicting `refuted`/,
      );

    // The 12 dropped not_enough_evidence instances: a count, and the ids in a closed
    // disclosure.
    const details = page.locator('#train-notes details.train-ids');
    assert.equal(await details.count(), 1);
    assert.equal(await details.evaluate((d) => d.open), false);
    assert.equal(await details.locator('summary').textContent(), '12 instance ids');
    const ids = (await details.locator('p').textContent()).split(', ');
    const want12 = readFileSync(c.file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((r) => r.label === 'not_enough_evidence')
      .map((r) => r.id);
    assert.deepEqual(ids, want12);
    const noteLine = await page.locator('#train-notes div', { has: page.locator('details.train-ids') }).textContent();
    assert.match(noteLine, /^Note: training data: 12 not_enough_evidence instances dropped/);
    assert.ok(!noteLine.split('12 instance ids')[0].includes(want12[0]), 'the ids are not inline');
  },
);

// An option out of its range is refused by the trainer, named by the option's key: the page
// says it after its own field, where the CLI names its flag (`--epochs 0: ...`).
test(
  'an option the trainer refuses is said after the form’s field',
  { skip: !haveModel && 'no default model' },
  async () => {
    const c = { ...CASES.mcqa, settings: { ...CASES.mcqa.settings, epochs: 0 } };
    await assert.rejects(pageTrain(app.page, c, 'never-trained'), /the page reported/);
    assert.equal(await app.page.textContent('#train-error'), 'Epochs: 0: expected a whole number from 1 to 10000');
  },
);

// Issue 45: the form offers both recipes, each with what it trains and its time on the
// chosen data, measured on the chosen model (the bundled MiniLM on the wasm CPU path):
// fast reads the folder's 256 tokens, finetune the model's full 512 (CasiMedicos' cases run
// past 256), and finetune, every layer forward and backward every epoch, takes longer.
test(
  'the form offers both recipes with the time each takes on the chosen data',
  { skip: !haveModel && 'no default model' },
  async () => {
    // A fresh page: the form at the engine's defaults (the tests above filled this one).
    const fresh = await openApp();
    try {
      await recipeEstimates(fresh.page);
    } finally {
      await fresh.close();
    }
  },
);

/** Both recipes offered, each with its estimate; an explicit option overrides both. */
async function recipeEstimates(page) {
  const recipes = await page.$$eval('#train-recipe option', (os) => os.map((o) => o.value));
  assert.deepEqual(recipes, ['', 'fast', 'finetune']);
  await page.selectOption('#opt-backend', 'cpu');
  await page.setInputFiles('#train-file', mcqaFile);
  await page.waitForFunction(() => /^fast: .*; finetune: /.test(document.querySelector('#train-estimates').textContent), null, {
    timeout: 120000,
  });
  const text = await page.textContent('#train-estimates');
  const m = text.match(
    /^fast: the head, 20 epochs, inputs up to (\d+) tokens, (at most )?about (\d+) (s|min); finetune: every layer, 20 epochs, inputs up to (\d+) tokens, (at most )?about (\d+) (s|min)$/,
  );
  assert.ok(m, text);
  assert.ok(Number(m[1]) <= 256 && Number(m[5]) > 256, `the lengths: ${text}`);
  const seconds = (n, unit) => Number(n) * (unit === 'min' ? 60 : 1);
  assert.ok(seconds(m[7], m[8]) > seconds(m[3], m[4]), `finetune takes longer: ${text}`);
  // An explicit option overrides both recipes' value, as a flag does.
  await page.selectOption('#train-freeze', 'top:1');
  await page.waitForFunction(() => /^fast: the top 1 layers/.test(document.querySelector('#train-estimates').textContent), null, {
    timeout: 120000,
  });
  assert.match(await page.textContent('#train-estimates'), /; finetune: the top 1 layers, /);
}

test(
  'training without a GPU says why in words, with the engine’s reason folded (issue 47, item 9)',
  { skip: !haveModel && 'no default model' },
  async () => {
    const { page } = app;
    const c = imbalancedCase('head', 1);
    // "auto" on this browser, which offers no WebGPU: the features are computed on the CPU.
    const trained = await pageTrain(page, c, 'page-no-gpu', 'auto');
    assert.equal(trained.backend.backend, 'cpu');
    assert.ok(trained.backend.fallback_reason, 'the engine says why');
    const said = await page.evaluate(() => {
      const box = document.querySelector('#train-result');
      const details = box.querySelector('details');
      return { visible: box.textContent.replace(details?.textContent ?? '', ''), details: details?.textContent };
    });
    assert.match(
      said.visible,
      /Features computed on the CPU \(WebAssembly\)\. No graphics card \(GPU\) was available to this page, so the model ran on the processor \(CPU\); the results are the same, only slower\./,
    );
    assert.doesNotMatch(said.visible, /wgpu|adapter|not compiled/);
    assert.equal(said.details, `Technical detail${trained.backend.fallback_reason}`);
  },
);
