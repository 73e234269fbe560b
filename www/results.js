// Results: draws one tab per view of a job's result, nothing computed here. The engine
// returns {report, tables, views...}: each tab's view model (the job's views, src/jobs/) and
// the same tables the CLI prints and writes with --csv (their CSV text comes from the
// engine, so exports match byte for byte). Which tabs a job has is the engine's too.
import { el, download, formatError } from './dom.js';
import { rankHeatmap, intervalChart, nrpBars } from './charts.js';

const $ = (sel) => document.querySelector(sel);
const fmt = (x, d = 3) => (x == null || !Number.isFinite(x) ? '—' : x.toFixed(d));
/** A `Stat` arrives as its bare value, or as {undefined: reason} (src/stats/mod.rs). */
const isUndefined = (s) => s != null && typeof s === 'object' && 'undefined' in s;
const statText = (s, d = 3) =>
  s == null ? '—' : isUndefined(s) ? `undefined (${s.undefined})` : typeof s === 'number' ? fmt(s, d) : String(s);

let nrpRerun = null;
/** The user's slider weights; they survive the re-render after each re-run. */
let nrpWeights = null;

/** Each view's drawing, by its key in the engine's description of a job (`views`): a job's
 *  reply carries the data of its views under these keys. `ctx.rerun(extra)` runs the same
 *  job again with more options (the NRP view's weights and fusion); `ctx.addFile(name,
 *  text)` lists a file the view made, `ctx.runJob(name)` runs another job (the Draft view's
 *  reviewed rubric, graded). */
const VIEWS = {
  ranking: (result) => rankingView(result),
  heatmap: (result) => heatmapView(result),
  robustness: (result) => robustnessView(result),
  agreement: (result) => agreementView(result),
  instances: (result) => drillView(result),
  nrp_view: (result, ctx) => nrpView(result, ctx.rerun, ctx.options),
  rubric_view: (result) => rubricView(result),
  grade_view: (result) => gradeView(result),
  grader_agreement: (result) => rubricAgreementView(result.grader_agreement),
  rubric_agreement_view: (result) => rubricAgreementView(result),
  statement_checks: (result) => statementsView(result),
  controls_view: (result) => controlsView(result),
  draft_view: (result, ctx) => draftView(result.draft_view, ctx),
};

export function renderResults(last, { runJob, jobs, addFile }) {
  const job = jobs[last.job];
  // The engine sends each tab's view (src/jobs/); this file only draws them.
  // An imported bundle's table and warnings come first, as `medrank import` prints them.
  const r = last.result;
  const result = {
    ...r,
    provenance: withImportedInputs(r.report?.provenance, r.import?.report.provenance, last.request.files),
    precision_change: last.precisionChange,
    // Grade on a file with people's judgements also sets the grader against them; those
    // tables come after Grade's own (its report and tables stay `medrank grade`'s).
    tables: [...(r.import?.tables || []), ...(r.tables || []), ...(r.grader_agreement?.tables || [])],
    // A message said once: the import's warnings about the user's files come first, and
    // the same message about the bundle imported from them is not repeated.
    warnings: onceEach([
      ...(r.import?.report.warnings || []),
      ...(r.report?.warnings || []),
      ...(r.grader_agreement?.report.warnings || []),
    ]),
  };
  const ctx = { rerun: (extra) => runJob(last.job, extra), options: last.request.options, runJob, addFile };
  // The job's tabs in its order; an optional one only when the reply has its data.
  // A result a trained model made says how far to trust it, in each of the job's tabs.
  const quality = r.report?.model_quality;
  const views = job.views
    .filter((v) => !v.optional || r[v.key] != null)
    .map((v) => [v.title, () => withQuality(quality, VIEWS[v.key](result, ctx))]);
  views.push(['Tables & export', () => tablesView(result)]);
  views.push([`Warnings (${result.warnings?.length || 0})`, () => warningsView(result)]);
  views.push(['Provenance', () => provenanceView(result)]);

  $('#results-empty').hidden = true;
  $('#results-body').hidden = false;
  const tabs = $('#tabs');
  const panels = $('#panels');
  const selected = tabs.querySelector('[aria-selected=true]')?.textContent;
  tabs.replaceChildren();
  panels.replaceChildren();
  views.forEach(([title, render], i) => {
    const tab = el(
      'button',
      {
        role: 'tab',
        id: `tab-${i}`,
        'aria-controls': `panel-${i}`,
        'aria-selected': 'false',
        tabindex: '-1',
        type: 'button',
      },
      title,
    );
    const panel = el('div', {
      role: 'tabpanel',
      id: `panel-${i}`,
      'aria-labelledby': `tab-${i}`,
      tabindex: '0',
      hidden: '',
    });
    panel.dataset.view = title
      .replace(/ \(\d+\)$/, '')
      .toLowerCase()
      .replace(/[^a-z]+/g, '-');
    panel.append(el('h3', { class: 'print-only sr-only' }, title), render());
    tab.addEventListener('click', () => select(i));
    tab.addEventListener('keydown', (e) => {
      const n = views.length;
      const next = { ArrowRight: (i + 1) % n, ArrowLeft: (i - 1 + n) % n, Home: 0, End: n - 1 }[e.key];
      if (next != null) {
        e.preventDefault();
        select(next);
        document.getElementById(`tab-${next}`).focus();
      }
    });
    tabs.append(tab);
    panels.append(panel);
  });
  const keep = views.findIndex(([t]) => t === selected);
  select(keep >= 0 ? keep : 0);
  $('#results').scrollIntoView({ behavior: 'smooth', block: 'start' });
}

/** The warnings, each message once (the first, in order). */
function onceEach(warnings) {
  const seen = new Set();
  return warnings.filter((w) => !seen.has(w.message) && seen.add(w.message));
}

/** The report's provenance with every file the user gave: an import's files (the
 *  Ranking-Over-Scoring files a ranking imported) first, with their sha256, then the
 *  report's own inputs, a file the run made from them (the imported bundle) said so. */
function withImportedInputs(provenance, imported, files) {
  if (!provenance) return provenance;
  const given = new Set(files.map((f) => f.name));
  const inputs = [
    ...(imported?.inputs || []),
    ...provenance.inputs.filter((f) => !imported?.inputs.some((i) => i.sha256 === f.sha256)),
  ];
  return {
    ...provenance,
    inputs: inputs.map((f) => (given.has(f.name) ? f : { ...f, made: true })),
  };
}

/** A view with the model's measured quality above it (`jobs::quality::ModelQuality`): its
 *  dev figures beside what learns nothing, and, for a model no better than that or measured
 *  on too few dev examples, that its results are not to be trusted. */
function withQuality(quality, view) {
  if (!quality) return view;
  return el('div', {}, trustLine('model-quality', 'Model quality', quality), view);
}

/** A line on how far to trust a model-made result: `{text, untrusted}` from the engine (a
 *  model's measured quality, or its agreement with people's labels beside it:
 *  `jobs::quality`), in red with why when it is not to be trusted. */
function trustLine(cls, label, { text, untrusted }) {
  return el(
    'p',
    { class: untrusted ? `${cls} issue bad` : cls, 'data-trusted': String(!untrusted) },
    el('strong', {}, `${label}: `),
    `${text}.`,
    ...(untrusted ? [' ', el('strong', {}, 'Not to be trusted:'), ` ${untrusted}.`] : []),
  );
}

/** The result's agreement with the people whose labels the input carries, when it does. */
const peopleLine = (agreement, label) => (agreement ? trustLine('people-agreement', label, agreement) : null);

function select(index) {
  for (const tab of document.querySelectorAll('#tabs [role=tab]')) {
    const on = tab.id === `tab-${index}`;
    tab.setAttribute('aria-selected', String(on));
    tab.tabIndex = on ? 0 : -1;
  }
  for (const panel of document.querySelectorAll('#panels [role=tabpanel]'))
    panel.hidden = panel.id !== `panel-${index}`;
}

// ---------------------------------------------------------------- ranking over scoring ---
function rankingView(result) {
  const box = el('div', {});
  box.append(
    el(
      'p',
      { class: 'muted' },
      'Each evaluator scores a system by how well it solves the task with that system’s arguments in its input. Higher is better; the interval is a paired bootstrap over instances. Control cases are shown in purple.',
    ),
  );
  const change = result.precision_change;
  if (change) box.append(precisionNote(change));
  for (const ev of result.ranking || []) {
    box.append(el('h3', {}, `${ev.evaluator} — ${ev.task} (${ev.metric})`));
    const people = peopleLine(ev.people, 'Agreement with people’s rankings');
    if (people) {
      people.dataset.task = ev.task;
      box.append(people);
    }
    const below = ev.systems.filter((s) => s.below_chance).map((s) => s.system);
    if (ev.chance != null)
      box.append(
        el(
          'p',
          { class: below.length ? 'chance issue warn' : 'chance muted', 'data-task': ev.task },
          `Chance: ${fmt(ev.chance)} (a uniform guess among each question’s options). ` +
            (below.length
              ? `Below chance: ${below.join(', ')} (the evaluator does worse than a guess with those arguments).`
              : 'No system scores below it.'),
        ),
      );
    const t = el('table', { class: 'ranking', 'data-evaluator': ev.evaluator, 'data-task': ev.task });
    t.append(
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ...['Rank', 'System', ev.metric, `${Math.round(ev.confidence * 100)}% interval`, 'Mean p(correct)', 'n'].map(
            (h, i) => el('th', { scope: 'col', class: i === 1 ? '' : 'num' }, h),
          ),
        ),
      ),
    );
    const tb = el('tbody', {});
    for (const s of ev.systems) {
      tb.append(
        el(
          'tr',
          { class: s.control ? 'control' : '', 'data-system': s.system },
          el('td', { class: 'num' }, fmtRank(s.rank)),
          el(
            'td',
            {},
            s.system,
            s.control ? el('span', { class: 'muted small' }, ' (control)') : null,
            s.below_chance ? el('span', { class: 'below-chance small' }, ' (below chance)') : null,
          ),
          el('td', { class: 'num', 'data-col': 'score' }, fmt(s.score)),
          el('td', { class: 'num' }, Number.isFinite(s.lo) ? `${fmt(s.lo)} – ${fmt(s.hi)}` : '—'),
          el('td', { class: 'num' }, fmt(s.mean_p_correct)),
          el('td', { class: 'num' }, String(s.n ?? '—')),
        ),
      );
    }
    t.append(tb);
    box.append(t);
    box.append(
      intervalChart(
        ev.systems.map((s) => ({
          name: s.system,
          score: s.score,
          lo: s.lo,
          hi: s.hi,
          control: s.control,
        })),
        { label: ev.metric },
      ),
    );
  }
  if (!(result.ranking || []).length) box.append(el('p', { class: 'empty' }, 'No evaluator results.'));
  return box;
}
/** The same files ranked in f32 and in 8-bit (int8) in this session: which systems changed
 *  places (app.js keeps both rankings). */
function precisionNote(changes) {
  const both = 'You ranked these files in 32-bit (f32) and in 8-bit (int8) arithmetic in this session';
  if (!changes.length) return el('p', { class: 'precision-change muted' }, `${both}: every system kept its place.`);
  const place = (r) => fmtRank(r);
  const list = el('ul', {});
  for (const c of changes)
    for (const p of c.pairs)
      list.append(
        el(
          'li',
          {},
          `${c.evaluator} — ${c.task}: ${p.a} and ${p.b} ` +
            (p.after[0] === p.after[1]
              ? `(ranked ${place(p.before[0])} and ${place(p.before[1])} in f32) are tied at ${place(p.after[0])} in int8`
              : p.before[0] === p.before[1]
                ? `(tied at ${place(p.before[0])} in f32) are ranked ${place(p.after[0])} and ${place(p.after[1])} in int8`
                : `swapped places: ${place(p.before[0])} and ${place(p.before[1])} in f32, ${place(p.after[0])} and ${place(p.after[1])} in int8`),
        ),
      );
  return el(
    'div',
    { class: 'precision-change issue warn' },
    `${both}, and the order changed. 8-bit arithmetic moves the scores a little; where an order differs, the f32 ranking is the reference:`,
    list,
  );
}

const fmtRank = (r) => (r == null ? '—' : Number.isInteger(r) ? String(r) : r.toFixed(1));

function heatmapView(result) {
  const box = el('div', {});
  if (!result.heatmap?.rows.length) return el('p', { class: 'empty' }, 'Nothing to draw.');
  box.append(
    el(
      'p',
      { class: 'muted' },
      'Rank of each system under each evaluator (1 = best, darker). A robust evaluator ranks every control case (right, dashed) below every real system.',
    ),
  );
  box.append(rankHeatmap(result.heatmap));
  box.append(
    el(
      'div',
      { class: 'legend' },
      el('span', {}, el('span', { class: 'swatch scale' }), 'rank 1 (best) … last'),
      el('span', {}, el('span', { class: 'swatch control' }), 'control cases'),
    ),
  );
  return box;
}

function robustnessView(result) {
  const box = el('div', {});
  for (const r of result.robustness || []) {
    const cls = r.robust == null ? 'unknown' : r.robust ? 'good' : 'bad';
    const head =
      r.robust == null
        ? `${r.evaluator} · ${r.task}: robustness not assessed — ${r.reason || 'no control cases in the input'}.`
        : r.robust
          ? `${r.evaluator} · ${r.task}: robust — every control case ranks below every real system.`
          : `${r.evaluator} · ${r.task}: NOT robust — ${r.violating_controls} control case${r.violating_controls === 1 ? '' : 's'} score at least as high as a real system (${r.violations.length} pair${r.violations.length === 1 ? '' : 's'}).`;
    const v = el('div', { class: `verdict ${cls}`, role: 'status', 'data-robust': String(r.robust) }, head);
    if (r.violations?.length) v.append(el('ul', {}, ...r.violations.map((x) => el('li', {}, x))));
    box.append(v);
  }
  if (!(result.robustness || []).length) box.append(el('p', { class: 'empty' }, 'No robustness verdict.'));
  return box;
}

function agreementView(result) {
  const a = result.agreement;
  if (!a || !a.length)
    return el(
      'p',
      { class: 'empty' },
      'Add a human rankings file (instance, annotator, system, rank) to compare the evaluator with clinicians.',
    );
  const box = el('div', {});
  for (const g of a) {
    box.append(el('h3', {}, `${g.evaluator} · ${g.task}`));
    box.append(
      el(
        'div',
        { class: 'stats-cards' },
        card('Kendall τ-b (evaluator vs humans)', statText(g.kendall_tau), g.kendall_detail, 'kendall'),
        card('Friedman test over human ranks', g.friedman, g.friedman_detail, 'friedman'),
        card('Krippendorff’s α (ordinal), annotators', statText(g.alpha), g.alpha_detail || '', 'alpha'),
      ),
    );
    if (g.human_ranks?.length) {
      const t = el('table', { class: 'human-ranks' });
      t.append(
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            el('th', { scope: 'col' }, 'System'),
            el('th', { scope: 'col', class: 'num' }, 'Mean human rank (1 = best)'),
            el('th', { scope: 'col', class: 'num' }, 'Evaluator score'),
          ),
        ),
      );
      t.append(
        el(
          'tbody',
          {},
          ...g.human_ranks.map((h) =>
            el(
              'tr',
              {},
              el('td', {}, h.system),
              el('td', { class: 'num' }, fmt(h.mean_rank, 2)),
              el('td', { class: 'num' }, fmt(h.score)),
            ),
          ),
        ),
      );
      box.append(t);
    }
  }
  return box;
}

function card(label, value, detail, key) {
  return el(
    'div',
    { class: 'stat-card', 'data-stat': key },
    el('div', { class: 'label' }, label),
    el('div', { class: 'value' }, value),
    el('div', { class: 'detail' }, detail),
  );
}

function drillView(result) {
  const instances = result.instances || [];
  if (!instances.length) return el('p', { class: 'empty' }, 'No instances.');
  const box = el('div', { class: 'drill' });
  const list = el('div', { class: 'drill-list', role: 'list', 'aria-label': 'Instances' });
  const detail = el('div', { class: 'drill-detail', 'aria-live': 'polite' });
  const show = (inst, button) => {
    for (const b of list.querySelectorAll('button')) b.removeAttribute('aria-current');
    button.setAttribute('aria-current', 'true');
    detail.replaceChildren(instanceDetail(inst, new Set(result.controls || [])));
  };
  instances.forEach((inst, i) => {
    const b = el(
      'button',
      { type: 'button', role: 'listitem' },
      `${inst.id}`,
      el('span', { class: 'muted small' }, ` · ${inst.task}`),
      el('span', { class: 'snippet small' }, snippet(inst.text)),
    );
    b.addEventListener('click', () => show(inst, b));
    b.addEventListener('keydown', (e) => {
      const buttons = [...list.querySelectorAll('button')];
      const j = buttons.indexOf(b) + (e.key === 'ArrowDown' ? 1 : e.key === 'ArrowUp' ? -1 : 0);
      if (j !== buttons.indexOf(b) && buttons[j]) {
        e.preventDefault();
        buttons[j].focus();
        buttons[j].click();
      }
    });
    list.append(b);
    if (i === 0) queueMicrotask(() => show(inst, b));
  });
  box.append(list, detail);
  return box;
}

/** The start of an instance's question, to tell the instances apart in the list. */
function snippet(text, words = 8) {
  const all = (text || '').trim().split(/\s+/);
  return all.length > words ? `${all.slice(0, words).join(' ')}…` : all.join(' ');
}

function instanceDetail(inst, controls) {
  const d = el('div', {});
  d.append(el('h3', {}, `Instance ${inst.id}`), el('div', { class: 'question' }, inst.text));
  if (inst.options?.length) {
    d.append(
      el(
        'ol',
        { class: 'options-list' },
        ...inst.options.map(([k, t]) =>
          el('li', { value: k }, t, k === inst.gold ? el('strong', { class: 'status-ok' }, '  ✓ correct') : null),
        ),
      ),
    );
  } else {
    d.append(el('p', {}, 'Gold label: ', el('strong', {}, inst.gold)));
  }
  for (const arg of inst.arguments) {
    const allRight = arg.predictions.length && arg.predictions.every((p) => p.predicted === inst.gold);
    const a = el('div', { class: `arg ${arg.predictions.length ? (allRight ? 'correct' : 'wrong') : ''}` });
    a.append(
      el('strong', {}, arg.system),
      controls.has(arg.system) ? el('span', { class: 'muted small' }, ' (control case)') : '',
      el(
        'div',
        {},
        arg.text == null
          ? el('em', { class: 'muted' }, '(generated by medrank for this run; see the controls table)')
          : arg.text || el('em', { class: 'muted' }, '(no argument)'),
      ),
    );
    for (const p of arg.predictions) {
      const line = el(
        'div',
        { class: 'small' },
        `${p.evaluator}: predicted `,
        el('strong', {}, p.predicted),
        ` · p(correct) = ${fmt(p.p_correct)}`,
      );
      if (p.probs?.length) {
        const t = el('table', { class: 'probs' });
        t.append(
          el(
            'tbody',
            {},
            ...p.probs.map(([label, prob]) => {
              const bar = el('span', { class: 'prob-bar' });
              bar.style.width = `${Math.round(prob * 120)}px`;
              return el(
                'tr',
                {},
                el('td', {}, label === inst.gold ? `${label} ✓` : label),
                el('td', { class: 'num' }, fmt(prob)),
                el('td', {}, bar),
              );
            }),
          ),
        );
        line.append(t);
      }
      a.append(line);
    }
    d.append(a);
  }
  return d;
}

// ---------------------------------------------------------------- NRP -------------------------
function nrpView(result, runAgain, options) {
  const n = result.nrp_view;
  const box = el('div', {});
  if (!n) return el('p', { class: 'empty' }, 'No NRP results.');
  box.append(
    el(
      'p',
      { class: 'muted' },
      `NRP = 1 − r / ${n.denominator === 'judged_documents_plus_answer' ? '(|D_q| + 1)' : '|D_q|'}: where an answer would land among the judged documents of its query (1 = above all of them). Ties: ${n.ties}.`,
    ),
  );
  // Dimension weights: changing one re-runs NRP in the worker, so intervals stay exact.
  // A run from the Run button starts again from the report's (default) weights.
  if (!options.weights) nrpWeights = { ...(n.weights || {}) };
  const current = nrpWeights;
  const weights = el(
    'div',
    { class: 'weights', role: 'group', 'aria-label': 'Relative weights of the dimensions' },
    el('strong', {}, 'Weights:'),
  );
  const rerun = () => {
    if (window.medrank.state.running) {
      nrpRerun = setTimeout(rerun, 100);
      return;
    }
    runAgain({ weights: Object.entries(current) });
  };
  for (const dim of n.dimensions) {
    const input = el('input', {
      type: 'range',
      min: '0',
      max: '1',
      step: '0.05',
      value: String(current[dim] ?? 0),
      'aria-label': `Weight of ${dim}`,
      'data-dimension': dim,
    });
    const out = el('output', {}, fmt(current[dim], 2));
    input.addEventListener('input', () => {
      out.textContent = fmt(Number(input.value), 2);
    });
    input.addEventListener('change', () => {
      current[dim] = Number(input.value);
      clearTimeout(nrpRerun);
      nrpRerun = setTimeout(rerun, 150);
    });
    weights.append(el('label', {}, dim, input, out));
  }
  box.append(weights);
  box.append(nrpBars(n.groups));
  const t = el('table', { class: 'nrp-table' });
  t.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...[
          'Model',
          'Prompt',
          'Mean NRP (weighted)',
          'Interval',
          ...n.dimensions.map((d) => `NRP ${d}`),
          'Answers',
        ].map((h, i) => el('th', { scope: 'col', class: i < 2 ? '' : 'num' }, h)),
      ),
    ),
  );
  t.append(
    el(
      'tbody',
      {},
      ...n.groups.map((g) =>
        el(
          'tr',
          { 'data-system': g.system, 'data-prompt': g.prompt },
          el('td', {}, g.system),
          el('td', {}, g.prompt),
          el('td', { class: 'num', 'data-col': 'mean' }, fmt(g.mean)),
          el('td', { class: 'num' }, Number.isFinite(g.lo) ? `${fmt(g.lo)} – ${fmt(g.hi)}` : '—'),
          ...n.dimensions.map((d) => el('td', { class: 'num' }, fmt(g.per_dimension?.[d]))),
          el('td', { class: 'num' }, String(g.n ?? '—')),
        ),
      ),
    ),
  );
  box.append(t);
  if (n.rankers?.length) {
    box.append(el('h3', {}, 'Ranker validation (nDCG@10 against the judgements)'));
    box.append(
      el(
        'ul',
        {},
        ...n.rankers.map((r) =>
          el('li', {}, `${r.dimension}: ${r.ranker} — nDCG@10 ${fmt(r.ndcg)}${r.chosen ? ' (chosen)' : ''}`),
        ),
      ),
    );
  }
  const unscored = n.unscored_per_dimension.filter((d) => d.documents > 0);
  box.append(
    el(
      'p',
      { class: 'muted', 'data-stat': 'unscored' },
      `Judged documents the chosen ranker did not score: ${n.unscored === 'drop' ? 'left out of D_q and of nDCG@10 (as the public code)' : 'ranked below every scored item'}${unscored.length ? ` — ${unscored.map((d) => `${d.dimension}: ${d.documents} documents of ${d.queries} queries`).join('; ')}` : ' — none'}.`,
    ),
  );
  if (n.agreement?.length) box.append(agreementTable(n));
  box.append(fusionForm(n, runAgain, options));
  return box;
}

/** Every ranker's agreement with the expert, and P(row agrees better than column). */
function agreementTable(n) {
  const names = n.agreement.map((a) => a.ranker);
  const block = el('div', {}, el('h3', {}, 'Expert agreement per ranker (Kendall τ-b)'));
  if (names.length > 1)
    block.append(
      el(
        'p',
        { class: 'muted' },
        'A cell is the paired bootstrap probability (resampling queries) that the row’s ranker agrees better with the expert than the column’s.',
      ),
    );
  const scope = n.agreement.find((a) => a.fusion_scope_words)?.fusion_scope_words;
  if (scope)
    block.append(
      el(
        'p',
        { class: 'muted', 'data-stat': 'fusion-scope' },
        `Fusion rankers here rank (or z-score) each item ${scope}; their NRP and nDCG@10 always use the pool.`,
      ),
    );
  const t = el('table', { class: 'nrp-agreement' });
  t.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...[
          'Ranker',
          'Mean τ-b',
          'Interval',
          'Pairs',
          'Chosen for',
          ...(names.length > 1 ? names.map((r) => `P(better than ${r})`) : []),
        ].map((h, i) => el('th', { scope: 'col', class: i === 0 || i === 4 ? '' : 'num' }, h)),
      ),
    ),
  );
  t.append(
    el(
      'tbody',
      {},
      ...n.agreement.map((a) =>
        el(
          'tr',
          { 'data-ranker': a.ranker },
          el('td', {}, a.ranker),
          el('td', { class: 'num', 'data-col': 'mean' }, statText(a.mean)),
          el('td', { class: 'num' }, Number.isFinite(a.lo) ? `[${fmt(a.lo)}, ${fmt(a.hi)}]` : '—'),
          el('td', { class: 'num' }, String(a.queries)),
          el('td', {}, a.chosen_for.join(', ')),
          ...(names.length > 1
            ? names.map((o) =>
                el('td', { class: 'num', 'data-other': o }, o === a.ranker ? '' : fmt(n.better[a.ranker]?.[o])),
              )
            : []),
        ),
      ),
    ),
  );
  block.append(t);
  return block;
}

/** A fusion ranker over the report's rankers: written to the Options field, then NRP re-runs. */
function fusionForm(n, runAgain, options) {
  const field = $('#opt-fuse');
  const input = el('input', {
    type: 'text',
    id: 'nrp-fuse',
    'aria-label': 'Fusion rankers',
    value: field?.value || (n.ranker_names.length > 1 ? `rrf:${n.ranker_names.slice(0, 2).join(',')}` : ''),
  });
  // The Options' choice of scope, as a second control here (the same choices).
  const scopeField = $('#opt-fuse-scope');
  const scope = scopeField.cloneNode(true);
  scope.removeAttribute('data-option');
  scope.removeAttribute('aria-describedby');
  Object.assign(scope, { id: 'nrp-fuse-scope', value: scopeField.value });
  scope.setAttribute('aria-label', 'Fusion scope of the expert agreement');
  const button = el('button', { type: 'button', class: 'secondary', id: 'nrp-fuse-run' }, 'Fuse and re-run');
  button.addEventListener('click', () => {
    if (field) field.value = input.value;
    if (scopeField) scopeField.value = scope.value;
    runAgain(options.weights ? { weights: options.weights } : {});
  });
  return el(
    'div',
    { class: 'row fusion' },
    el('label', {}, 'Fusion ranker ([name=]rrf:A,B or zsum:A,B; “;” between several): ', input),
    el('label', {}, 'expert agreement ranks each item ', scope),
    button,
  );
}

// ---------------------------------------------------------------- rubric ----------------------
/** The Scores tab (Rubric and Grade): each score's systems with mean and interval, the
 *  overall row charted. */
function rubricView(result) {
  const v = result.rubric_view;
  if (!v?.scores.length) return el('p', { class: 'empty' }, 'No scores.');
  const pct = `${Math.round(v.confidence * 100)}%`;
  const box = el('div', {});
  box.append(
    el(
      'p',
      { class: 'muted' },
      v.graded_by_model
        ? `Mean score per system, clipped to [0, 1], with met = P(met) ≥ 0.5. The expected mean counts each criterion by its P(met); the ${pct} interval is a bootstrap over prompts that draws met from P(met) in every resample, so an unsure grader widens it.`
        : `Mean score per system, clipped to [0, 1]; the ${pct} interval is a bootstrap over prompts.`,
    ),
  );
  box.append(
    intervalChart(
      v.scores[0].systems.map((s) => ({ name: s.system, score: s.mean, lo: s.lo, hi: s.hi, control: false })),
      { label: `${v.scores[0].score} score` },
    ),
  );
  const headers = [
    'Score',
    'System',
    'Mean',
    ...(v.graded_by_model ? ['Expected mean'] : []),
    `${pct} interval`,
    'Unclipped mean',
    'n',
  ];
  const t = el('table', { class: 'rubric-scores' });
  t.append(
    el('thead', {}, el('tr', {}, ...headers.map((h, i) => el('th', { scope: 'col', class: i < 2 ? '' : 'num' }, h)))),
  );
  const tb = el('tbody', {});
  for (const score of v.scores) {
    for (const s of score.systems) {
      tb.append(
        el(
          'tr',
          { 'data-score': score.score, 'data-system': s.system },
          el('td', {}, score.score),
          el('td', {}, s.system),
          el('td', { class: 'num', 'data-col': 'mean' }, s.mean == null ? `undefined (${s.undefined})` : fmt(s.mean)),
          ...(v.graded_by_model ? [el('td', { class: 'num', 'data-col': 'expected' }, fmt(s.expected_mean))] : []),
          el('td', { class: 'num', 'data-col': 'interval' }, s.lo == null ? '—' : `${fmt(s.lo)} – ${fmt(s.hi)}`),
          el('td', { class: 'num' }, fmt(s.unclipped_mean)),
          el('td', { class: 'num' }, String(s.n)),
        ),
      );
    }
  }
  t.append(tb);
  box.append(t);
  return box;
}

// ---------------------------------------------------------------- rubric agreement -----------
/** A `Stat` in a cell: the value to 3 decimals (the exact value in data-value, for tests and
 *  copying), or "undefined (reason)" — never 0 or NaN. */
function statCell(s, col) {
  if (isUndefined(s))
    return el(
      'td',
      { class: 'num undefined', 'data-col': col, 'data-undefined': s.undefined },
      `undefined (${s.undefined})`,
    );
  return el('td', { class: 'num', 'data-col': col, 'data-value': String(s) }, fmt(s));
}

/** "both met 18 · both not met 15 · rater only 12 · others only 9": the pairs' confusion. */
const confusionText = ([[nn, nm], [mn, mm]]) =>
  `both met ${mm} · both not met ${nn} · rater only ${nm} · others only ${mn}`;

/** The Agreement tab: per group the grader against the people and the people's mean, then
 *  every rater's figures (src/jobs/views.rs::rubric_agreement_view). */
function rubricAgreementView(result) {
  const v = result.rubric_agreement_view;
  if (!v?.groups.length) return el('p', { class: 'empty' }, 'No judged criteria.');
  const box = el('div', {});
  const people = v.people.length === 1 ? '1 person' : `${v.people.length} people`;
  box.append(
    el(
      'p',
      { class: 'muted' },
      `${v.items} judged (response, criterion) items, by ${people} (${v.people.join(', ')})` +
        (v.unjudged_criteria ? `; ${v.unjudged_criteria} criteria nobody judged are left out` : '') +
        '. Over every (rater, other) pair of labels on an item: macro-F1 is the mean of the F1 of met and of not met (HealthBench’s figure; a random grader scores about 0.5), κ is Cohen’s kappa. Each person is compared with the others the same way' +
        (v.has_grader
          ? ': a grader at the people’s mean agrees with them as well as a typical colleague does.'
          : '; add a grader’s graded file (kind “A grader’s graded rubric”) to set a grader beside them.'),
    ),
  );
  const overall = peopleLine(v.grader_overall, 'The grader against the people');
  if (overall) box.append(overall);
  const against = { at_or_above: 'at or above the people’s mean', below: 'below the people’s mean' };
  const headers = [
    'Group',
    'Items',
    ...(v.has_grader ? ['Grader pairs', 'Grader macro-F1', 'Grader κ'] : []),
    'People’s mean macro-F1',
    'People’s mean κ',
    ...(v.has_grader ? ['Grader'] : []),
  ];
  const groups = el('table', { class: 'rubric-agreement' });
  groups.append(
    el('thead', {}, el('tr', {}, ...headers.map((h, i) => el('th', { scope: 'col', class: i ? 'num' : '' }, h)))),
  );
  const gb = el('tbody', {});
  for (const g of v.groups) {
    const grader = g.grader;
    gb.append(
      el(
        'tr',
        { 'data-group': g.group },
        el('th', { scope: 'row' }, g.group),
        el('td', { class: 'num', 'data-col': 'n-items' }, String(g.items)),
        ...(v.has_grader
          ? grader
            ? [
                el('td', { class: 'num', 'data-col': 'pairs' }, String(grader.pairs)),
                statCell(grader.macro_f1, 'macro_f1'),
                statCell(grader.kappa, 'kappa'),
              ]
            : [el('td', { class: 'num', colspan: '3' }, '—')]
          : []),
        statCell(g.human_mean_macro_f1, 'human_mean_macro_f1'),
        statCell(g.human_mean_kappa, 'human_mean_kappa'),
        ...(v.has_grader
          ? [el('td', { 'data-col': 'against' }, against[g.grader_against_people] || 'not comparable (undefined)')]
          : []),
      ),
    );
  }
  groups.append(gb);
  box.append(el('h3', {}, 'Per group'), groups);

  const raters = el('table', { class: 'rubric-agreement-raters' });
  raters.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['Group', 'Rater', 'Pairs', 'F1 met', 'F1 not met', 'Macro-F1', 'κ', 'Pairs (rater vs others)'].map((h, i) =>
          el('th', { scope: 'col', class: i >= 2 && i <= 6 ? 'num' : '' }, h),
        ),
      ),
    ),
  );
  const rb = el('tbody', {});
  for (const g of v.groups) {
    const rows = [...(g.grader ? [{ ...g.grader, isGrader: true }] : []), ...g.people];
    for (const r of rows) {
      rb.append(
        el(
          'tr',
          {
            'data-group': g.group,
            'data-rater': r.isGrader ? '(grader)' : r.rater,
            class: r.isGrader ? 'grader-row' : '',
          },
          el('td', {}, g.group),
          el('td', {}, r.isGrader ? 'the grader' : r.rater),
          el('td', { class: 'num', 'data-col': 'pairs' }, String(r.pairs)),
          statCell(r.f1_met, 'f1_met'),
          statCell(r.f1_not_met, 'f1_not_met'),
          statCell(r.macro_f1, 'macro_f1'),
          statCell(r.kappa, 'kappa'),
          el('td', { class: 'small' }, confusionText(r.confusion)),
        ),
      );
    }
  }
  raters.append(rb);
  box.append(el('h3', {}, 'Each rater against the others'), raters);
  return box;
}

/** The Grade job's Criteria tab: the grader, any cut pairs, each response's criteria with
 *  P(met), and the graded file. */
/** The Controls job's tab: the control systems added to every instance, and the bundle
 *  with them to download (what `medrank controls --out` writes). */
function controlsView(result) {
  const v = result.controls_view;
  const names = v.added.flatMap((c, i) => [...(i ? [', '] : []), el('code', {}, c)]);
  const plural = v.added.length === 1 ? '' : 's';
  const box = el(
    'div',
    {},
    el('p', {}, `${v.added.length} control case${plural} added to each of ${v.instances} instances: `, ...names, '.'),
  );
  if (v.noise_source)
    box.append(
      el(
        'p',
        { class: 'muted' },
        'The noise control gives each instance the argument of ',
        el('code', {}, v.noise_source),
        ' for another instance of the same task (the tables list the pairs).',
      ),
    );
  const button = el('button', { type: 'button', id: 'controls-download' }, `Download ${v.bundle_name}`);
  button.addEventListener('click', () => download(v.bundle_name, v.bundle_jsonl, 'application/jsonl'));
  box.append(button);
  return box;
}

/** The reviewer's work on the last draft: it survives the page drawing the results again
 *  (the same draft drawn again keeps its edits). */
let review = null;

/** The Draft tab: each prompt's drafted criteria to review (keep or not, edit, delete, add;
 *  points and tags), each shown in the evidence passage it was cut from with the statement
 *  marked; the reviewed rubric downloads as the §7 file `medrank grade` reads, or goes to
 *  the page's files and is graded at once. The engine gives the drafted file's lines; this
 *  view only puts each prompt's reviewed criteria into them. */
function draftView(v, ctx) {
  if (review?.drafted !== v.rubric_jsonl) {
    review = {
      drafted: v.rubric_jsonl,
      prompts: v.prompts.map((p) => ({
        id: p.id,
        criteria: p.criteria.map((c) => ({
          keep: true,
          text: c.drafted.criterion,
          points: c.drafted.points,
          tags: c.drafted.tags || [],
          drafted: c.drafted,
          source: c,
        })),
      })),
    };
  }
  const box = el('div', { class: 'draft-review' });
  box.append(
    el(
      'p',
      { class: 'muted' },
      'Extractive: every criterion below is a statement of your evidence in its own words, chosen by BM25; no model wrote it. Review each one: keep it or not, edit it, delete it, or add your own; set points and tags. What you keep is the rubric that is graded and downloaded.',
    ),
  );
  const summary = el('p', { class: 'draft-summary', role: 'status' });
  const note = el('p', { class: 'draft-note', role: 'status' });
  const downloadButton = el('button', { type: 'button', id: 'draft-download' }, `Download ${v.rubric_name}`);
  downloadButton.addEventListener('click', () =>
    download(v.rubric_name, reviewedRubric(v, review).jsonl, 'application/x-ndjson'),
  );
  const grade = el('button', { type: 'button', id: 'draft-grade' }, 'Grade with this rubric');
  grade.title = v.gradable
    ? 'Adds the reviewed rubric to the files and grades it with the chosen model'
    : 'A prompt without responses drafts a rubric that waits for them: add responses to the prompts file to grade';
  grade.addEventListener('click', async () => {
    const entry = await ctx.addFile(v.rubric_name, reviewedRubric(v, review).jsonl);
    if (entry.check.status === 'bad') {
      note.replaceChildren(`${v.rubric_name}: `, formatError(entry.check.error));
      return;
    }
    const run = document.getElementById(`run-${v.grade_job}`);
    if (run?.disabled) note.textContent = `${v.rubric_name} is in the files. ${run.title}`;
    else ctx.runJob(v.grade_job);
  });
  const refresh = () => {
    const r = reviewedRubric(v, review);
    summary.textContent = r.summary;
    downloadButton.disabled = !!r.error;
    grade.disabled = !!r.error || !v.gradable;
    note.textContent = r.error || '';
  };
  for (const p of review.prompts) {
    const section = el('section', { class: 'draft-prompt', 'data-prompt': p.id });
    const shown = v.prompts.find((q) => q.id === p.id);
    section.append(el('h3', {}, p.id), el('p', { class: 'muted' }, 'Searched with: ', el('q', {}, shown.query)));
    const list = el('ol', { class: 'draft-criteria' });
    const draw = () => {
      list.replaceChildren(...p.criteria.map((c, i) => criterionEditor(p, c, i, draw, refresh)));
      refresh();
    };
    const add = el('button', { type: 'button', class: 'draft-add secondary' }, 'Add a criterion');
    add.addEventListener('click', () => {
      // Points and tags as drafted (the draft's options); the reviewer changes them.
      const like = shown.criteria[0].drafted;
      p.criteria.push({
        keep: true,
        text: '',
        points: like.points,
        tags: [...(like.tags || [])],
        drafted: {},
        source: null,
      });
      draw();
      list.lastElementChild?.querySelector('textarea')?.focus();
    });
    section.append(list, add);
    box.append(section);
    draw();
  }
  box.append(summary, el('div', { class: 'draft-actions' }, downloadButton, grade), note);
  return box;
}

/** One criterion's editor: keep, text, points, tags, delete, and its source passage. */
function criterionEditor(prompt, c, index, redraw, refresh) {
  const label = `criterion ${index + 1} of ${prompt.id}`;
  const item = el('li', { class: 'draft-criterion' + (c.keep ? '' : ' left-out') });
  const keep = el('input', { type: 'checkbox', class: 'draft-keep', 'aria-label': `keep ${label}` });
  keep.checked = c.keep;
  keep.addEventListener('change', () => {
    c.keep = keep.checked;
    item.classList.toggle('left-out', !c.keep);
    refresh();
  });
  const text = el('textarea', { class: 'draft-text', rows: '2', 'aria-label': `text of ${label}` });
  text.value = c.text;
  text.addEventListener('input', () => {
    c.text = text.value;
    refresh();
  });
  const points = el('input', {
    type: 'number',
    step: 'any',
    class: 'draft-points',
    'aria-label': `points of ${label}`,
  });
  points.value = String(c.points);
  points.addEventListener('input', () => {
    c.points = points.value.trim() === '' ? NaN : Number(points.value);
    refresh();
  });
  const tags = el('input', { type: 'text', class: 'draft-tags', 'aria-label': `tags of ${label}` });
  tags.value = c.tags.join(', ');
  tags.addEventListener('input', () => {
    c.tags = tags.value
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    refresh();
  });
  const remove = el(
    'button',
    { type: 'button', class: 'draft-delete secondary', 'aria-label': `delete ${label}` },
    'Delete',
  );
  remove.addEventListener('click', () => {
    prompt.criteria.splice(index, 1);
    redraw();
  });
  item.append(
    el(
      'div',
      { class: 'draft-fields' },
      el('label', {}, keep, ' keep'),
      text,
      el('label', {}, 'points ', points),
      el('label', {}, 'tags ', tags),
      remove,
    ),
  );
  const s = c.source;
  item.append(
    s
      ? el(
          'blockquote',
          { class: 'draft-source' },
          el('cite', { class: 'muted' }, s.document, s.contradicted ? ' · the conversation contradicts it' : ''),
          el('div', {}, s.before, el('mark', {}, s.statement), s.after),
        )
      : el('p', { class: 'draft-source muted' }, 'Added by the reviewer: no source in the evidence.'),
  );
  return item;
}

/** The reviewed rubric: each drafted line with its prompt's kept criteria (the drafted
 *  criterion's fields, its text, points and tags as reviewed; an edited criterion keeps the
 *  source it was cut from); a prompt left without criteria leaves its lines out. */
function reviewedRubric(v, review) {
  const kept = new Map();
  let blank = 0;
  let error = null;
  for (const p of review.prompts) {
    const criteria = [];
    for (const [i, c] of p.criteria.entries()) {
      if (!c.keep) continue;
      if (!c.text.trim()) {
        blank++;
        continue;
      }
      if (!Number.isFinite(c.points))
        error ??= `Criterion ${i + 1} of ${p.id} needs its points (a number; negative for something a response must not do).`;
      const { criterion, points, tags, ...rest } = c.drafted;
      criteria.push({
        criterion: c.text.trim(),
        points: c.points,
        ...(c.tags.length ? { tags: c.tags } : {}),
        ...rest,
      });
    }
    kept.set(p.id, criteria);
  }
  const lines = v.lines.filter((l) => kept.get(l.id)?.length).map((l) => ({ ...l, criteria: kept.get(l.id) }));
  const n = [...kept.values()].reduce((a, c) => a + c.length, 0);
  const without = review.prompts.filter((p) => !kept.get(p.id).length).map((p) => p.id);
  if (!lines.length) error ??= 'No criterion is kept: nothing to grade or download.';
  const parts = [`${n} criteri${n === 1 ? 'on' : 'a'} kept for ${kept.size - without.length} prompt(s)`];
  if (blank) parts.push(`${blank} blank one(s) left out`);
  if (without.length) parts.push(`no criterion for ${without.join(', ')}: its lines are left out`);
  return { jsonl: lines.map((l) => JSON.stringify(l)).join('\n') + '\n', summary: parts.join('; ') + '.', error };
}

/** Statement checks: each system's means with their intervals, then each answer's
 *  statements with the NLI label (the report's numbers, drawn). */
function statementsView(result) {
  const report = result.report;
  if (!report) return el('p', { class: 'empty' }, 'Nothing checked.');
  const box = el('div', {});
  const labels = report.labels;
  box.append(
    el(
      'p',
      { class: 'grader' },
      el('strong', {}, 'NLI model: '),
      `${report.model} (entailment = label ${labels.entailment}, contradiction = label ${labels.contradiction}). `,
      'Comprehensiveness: the share of must-have statements the answer entails; contradicted: its statements it contradicts (K-QA).',
    ),
  );
  const sys = el('table', { class: 'statement-systems' });
  sys.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['System', 'Figure', 'n', 'Mean', 'Interval'].map((h, i) =>
          el('th', { scope: 'col', class: i >= 2 ? 'num' : '' }, h),
        ),
      ),
    ),
  );
  const sb = el('tbody', {});
  for (const s of report.systems)
    for (const f of s.figures)
      sb.append(
        el(
          'tr',
          { 'data-system': s.system, 'data-figure': f.figure },
          el('td', {}, s.system),
          el('td', {}, f.figure),
          el('td', { class: 'num' }, String(f.n)),
          el('td', { class: 'num', 'data-col': 'mean' }, statText(f.mean)),
          el(
            'td',
            { class: 'num', 'data-col': 'interval' },
            isUndefined(f.interval) || f.interval == null
              ? statText(f.interval)
              : `${fmt(f.interval.lo)} – ${fmt(f.interval.hi)}`,
          ),
        ),
      );
  sys.append(sb);
  box.append(sys);
  const t = el('table', { class: 'statement-judgements' });
  t.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['Statement', 'Kind', 'P(entailment)', 'P(contradiction)', 'Judgement'].map((h, i) =>
          el('th', { scope: 'col', class: i === 2 || i === 3 ? 'num' : '' }, h),
        ),
      ),
    ),
  );
  const tb = el('tbody', {});
  for (const a of report.answers) {
    tb.append(
      el(
        'tr',
        { class: 'response-head', 'data-answer': a.id, 'data-system': a.system },
        el(
          'th',
          { scope: 'rowgroup', colspan: '5' },
          `${a.id} · ${a.system} · line ${a.line} — comprehensiveness ${statText(a.comprehensiveness)}, ${a.contradicted} of ${a.statements} contradicted`,
        ),
      ),
    );
    for (const j of report.judgements.filter((j) => j.id === a.id && j.system === a.system)) {
      const label = j.entailed ? 'entailed' : j.contradicted ? 'contradicted' : 'neither';
      tb.append(
        el(
          'tr',
          { 'data-answer': a.id, 'data-system': a.system },
          el('td', {}, j.statement),
          el('td', {}, j.must_have ? 'must have' : 'nice to have'),
          el('td', { class: 'num', 'data-col': 'p_entailment' }, fmt(j.p_entailment)),
          el('td', { class: 'num' }, fmt(j.p_contradiction)),
          el('td', { class: j.contradicted ? 'status-bad' : j.entailed ? 'status-ok' : '' }, label),
        ),
      );
    }
  }
  t.append(tb);
  box.append(t);
  return box;
}

function gradeView(result) {
  const v = result.grade_view;
  if (!v) return el('p', { class: 'empty' }, 'Nothing graded.');
  const box = el('div', {});
  box.append(
    el(
      'p',
      { class: 'grader', 'data-grader-kind': v.grader.kind },
      el('strong', {}, 'Grader: '),
      `${v.grader.model} (labels ${v.grader.labels.join(', ')}): ${v.grader.description}.`,
    ),
  );
  // Beside the verdicts, how well they agree with the people who judged the same criteria.
  const people = peopleLine(
    result.grader_agreement?.rubric_agreement_view.grader_overall,
    'Agreement with people’s judgements',
  );
  if (people) box.append(people);
  if (v.truncation) box.append(el('div', { class: 'issue warn', 'data-stat': 'truncation' }, v.truncation));
  box.append(gradedFileButton(v));
  const t = el('table', { class: 'grade-criteria' });
  t.append(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['Criterion', 'Points', 'P(met)', '', 'Met'].map((h, i) =>
          el('th', { scope: 'col', class: i === 1 || i === 2 ? 'num' : '' }, h),
        ),
      ),
    ),
  );
  const tb = el('tbody', {});
  for (const r of v.responses) {
    const score =
      r.score == null
        ? 'score undefined'
        : `score ${fmt(r.score)} (${points(r.achieved)} of ${points(r.possible)} points)`;
    tb.append(
      el(
        'tr',
        { class: 'response-head', 'data-response': r.id, 'data-system': r.system },
        el('th', { scope: 'rowgroup', colspan: '5' }, `${r.id} · ${r.system} · line ${r.line} — ${score}`),
      ),
    );
    for (const c of r.criteria) {
      const bar = el('span', { class: 'prob-bar' });
      bar.style.width = `${Math.round(c.p_met * 120)}px`;
      // Good or bad for the response: a met criterion earns its points, so a met penalty
      // (negative points) counts against it, and an unmet one is in its favour.
      const good = c.met === c.points > 0;
      tb.append(
        el(
          'tr',
          { 'data-response': r.id, 'data-system': r.system, 'data-index': String(c.index) },
          el('td', {}, c.criterion),
          el('td', { class: 'num' }, points(c.points)),
          el('td', { class: 'num', 'data-col': 'p_met' }, fmt(c.p_met)),
          el('td', {}, bar),
          el(
            'td',
            { class: good ? 'status-ok' : 'status-bad', 'data-col': 'verdict' },
            `${c.met ? 'met' : 'not met'} · ${good ? 'good' : 'bad'} for the response`,
          ),
        ),
      );
    }
  }
  t.append(tb);
  box.append(t);
  return box;
}

const points = (x) => (Number.isInteger(x) ? String(x) : fmt(x, 2));

/** Saves the graded file (the rubric with met and p_met per criterion: the CLI's --out). */
function gradedFileButton(v) {
  const button = el(
    'button',
    { type: 'button', class: 'secondary', 'data-export': v.graded_name },
    `Download the graded file (${v.graded_name})`,
  );
  button.addEventListener('click', () => download(v.graded_name, v.graded_jsonl, 'application/x-ndjson'));
  return el('p', { class: 'row' }, button);
}

// ---------------------------------------------------------------- tables -----------------------
function tablesView(result) {
  const box = el('div', {});
  if (result.grade_view) box.append(gradedFileButton(result.grade_view));
  for (const table of result.tables || []) box.append(tableBlock(table));
  if (!(result.tables || []).length) box.append(el('p', { class: 'empty' }, 'No tables.'));
  return box;
}

function tableBlock(table) {
  const block = el('div', { class: 'table-block', 'data-table': table.name });
  const csvButton = el(
    'button',
    { type: 'button', class: 'secondary small-btn', 'data-export': `${table.name}.csv` },
    'CSV',
  );
  csvButton.addEventListener('click', () => download(`${table.name}.csv`, table.csv, 'text/csv'));
  const jsonButton = el(
    'button',
    { type: 'button', class: 'secondary small-btn', 'data-export': `${table.name}.json` },
    'JSON',
  );
  jsonButton.addEventListener('click', () =>
    download(`${table.name}.json`, JSON.stringify(tableAsObjects(table), null, 2), 'application/json'),
  );
  block.append(
    el(
      'div',
      { class: 'table-tools' },
      el('h3', {}, table.title),
      el('span', { class: 'row' }, 'Export: ', csvButton, jsonButton),
    ),
  );
  // A table this run left empty says so in words rather than drawing bare headers.
  if (!table.rows.length) {
    block.append(
      el(
        'p',
        { class: 'empty-table muted' },
        `Nothing in this run: the table (${table.headers.join(', ')}) has no row.`,
      ),
    );
    return block;
  }
  const t = el('table', {});
  t.append(el('thead', {}, el('tr', {}, ...table.headers.map((h) => el('th', { scope: 'col' }, h)))));
  t.append(
    el(
      'tbody',
      {},
      ...table.rows.map((r) => el('tr', {}, ...r.map((c) => el('td', { class: isNumeric(c) ? 'num' : '' }, c)))),
    ),
  );
  // A table wider than the card (many systems, a long evaluator name) scrolls in its own
  // box, which the keyboard reaches, rather than pushing the whole tab sideways.
  block.append(el('div', { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': table.title }, t));
  return block;
}
const isNumeric = (c) => /^-?\d+(\.\d+)?$/.test(c);
const tableAsObjects = (t) => t.rows.map((r) => Object.fromEntries(t.headers.map((h, i) => [h, r[i]])));

function warningsView(result) {
  const w = result.warnings || [];
  if (!w.length) return el('p', { class: 'empty' }, 'No warnings: every input was used as given.');
  return el('ul', { class: 'warnings-list' }, ...w.map((x) => el('li', {}, formatError(x))));
}

function provenanceView(result) {
  const p = result.provenance;
  if (!p) return el('p', { class: 'empty' }, 'No provenance recorded.');
  const box = el('div', {});
  box.append(el('p', {}, `${p.program} ${p.version}, seed ${p.seed}`));
  const t = el('table', {});
  t.append(
    el('thead', {}, el('tr', {}, el('th', {}, 'Input'), el('th', {}, 'sha256'), el('th', { class: 'num' }, 'bytes'))),
  );
  t.append(
    el(
      'tbody',
      {},
      ...p.inputs.map((f) =>
        el(
          'tr',
          {},
          el(
            'td',
            {},
            f.name,
            f.made ? el('span', { class: 'muted small' }, ' (made in this run from the files above)') : null,
          ),
          el('td', {}, el('code', {}, f.sha256)),
          el('td', { class: 'num' }, String(f.bytes)),
        ),
      ),
    ),
  );
  box.append(t);
  if (p.conventions?.length)
    box.append(
      el('h3', {}, 'Conventions'),
      el('ul', {}, ...p.conventions.map(([k, v]) => el('li', {}, el('strong', {}, k), `: ${v}`))),
    );
  return box;
}

// ---------------------------------------------------------------- printable report ---------
const REPORT_CSS = `body{font-family:system-ui,"DejaVu Sans",sans-serif;color:#1b2430;max-width:1000px;margin:2rem auto;padding:0 1rem;line-height:1.45}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:2px solid #dde3ea;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;font-size:.9rem;margin:.5rem 0 1rem}th,td{border-bottom:1px solid #dde3ea;padding:.3rem .5rem;text-align:left}
th{background:#f0f3f6}td.num{text-align:right;font-variant-numeric:tabular-nums}tr.control td{color:#7a5195}
.verdict{padding:.6rem .8rem;border-radius:6px;margin:.4rem 0}.verdict.good{background:#e6f4ea}.verdict.bad{background:#fdecea}
  .stat-cards{display:flex;gap:1rem;flex-wrap:wrap}.stat-card{border:1px solid #dde3ea;border-radius:6px;padding:.5rem .8rem;min-width:200px}.stat-card .value{font-size:1.3rem;font-weight:600}.stat-card .label,.stat-card .detail{color:#5b6776;font-size:.85rem}
.muted{color:#5b6776}svg text{font-size:12px;font-family:inherit}.grid-line{stroke:#e5e9ee}code{font-size:.8rem}
@media print{h2{break-after:avoid}table,svg{break-inside:avoid}}`;

/** A self-contained HTML report: inline styles and SVG, no script, nothing to fetch. */
export function buildReportHtml(last, jobs) {
  const panels = [...document.querySelectorAll('#panels [role=tabpanel]')];
  const tabs = [...document.querySelectorAll('#tabs [role=tab]')];
  const sections = panels
    .map((p, i) => {
      const clone = p.cloneNode(true);
      clone.querySelectorAll('button, input, .weights, .print-only').forEach((n) => n.remove());
      clone.querySelectorAll('[hidden]').forEach((n) => n.removeAttribute('hidden'));
      return `<section><h2>${escapeHtml(tabs[i].textContent)}</h2>${clone.innerHTML}</section>`;
    })
    .filter((s, i) => !/^(Per instance|Tables)/.test(tabs[i].textContent));
  const tables = (last.result.tables || []).map(
    (t) =>
      `<section><h2>${escapeHtml(t.title)}</h2><table><thead><tr>${t.headers.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>${t.rows.map((r) => `<tr>${r.map((c) => `<td${isNumeric(c) ? ' class="num"' : ''}>${escapeHtml(c)}</td>`).join('')}</tr>`).join('')}</tbody></table></section>`,
  );
  const when = new Date().toISOString().replace('T', ' ').slice(0, 16);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>medrank report — ${escapeHtml(last.job)}</title><style>${REPORT_CSS}</style></head><body>
<h1>medrank report: ${escapeHtml(jobs[last.job]?.title || last.job)}</h1>
<p class="muted">Generated ${when} UTC in the browser by medrank ${escapeHtml(last.result.report?.provenance?.version || '')}. Seed ${escapeHtml(String(last.request.options.seed))}.</p>
${sections.join('\n')}
<h2>All tables</h2>${tables.join('\n')}
</body></html>`;
}
function escapeHtml(s) {
  return String(s).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
  );
}
