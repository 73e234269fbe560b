// Charts drawn as inline SVG (no chart library, nothing fetched). Each function returns an
// <svg> element sized by its content; colours come from one palette so charts agree.

const NS = 'http://www.w3.org/2000/svg'; // an XML namespace name, never fetched
const PALETTE = ['#0b6e7f', '#d1495b', '#edae49', '#00798c', '#30638e', '#66a182', '#8d5a97', '#e07a5f'];

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) if (c != null) node.append(c);
  return node;
}
function text(x, y, content, attrs = {}) {
  return svg('text', { x, y, ...attrs }, String(content));
}
const fmt = (x, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : '—');

/** Ranks as colour: rank 1 dark, the last rank pale (the paper's Figures 3 and 4). */
function rankColour(rank, worst) {
  const t = worst > 1 ? (rank - 1) / (worst - 1) : 0;
  const light = 22 + t * 66; // HSL lightness 22%..88%
  return `hsl(188, 62%, ${light}%)`;
}

/**
 * Evaluators (rows) by systems (columns), each cell the system's rank under that evaluator.
 * Control cases are drawn apart, after a gap, with a dashed outline and their own heading.
 * @param {{rows: string[], columns: {system: string, control: boolean}[], cells: ({rank: number, score: number|null}|null)[][]}} m
 *   the engine's heatmap view (src/jobs/evaluate/views.rs)
 */
export function rankHeatmap(m) {
  const at = new Map(m.columns.map((c, i) => [c.system, i]));
  const cellAt = (r, s) => m.cells[r][at.get(s)];
  const primary = m.columns.filter((c) => !c.control).map((c) => c.system);
  const controls = m.columns.filter((c) => c.control).map((c) => c.system);
  const cell = 64,
    rowH = 40,
    left = Math.max(120, 8 * Math.max(...m.rows.map((r) => r.length), 6)),
    top = 110,
    gap = controls.length ? 28 : 0;
  const width = left + cell * (primary.length + controls.length) + gap + 20;
  const height = top + rowH * m.rows.length + 20;
  const worst = m.columns.length;
  const root = svg('svg', {
    class: 'chart heatmap',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: 'img',
    'aria-label': 'Rank heatmap: evaluators by systems; rank 1 is best',
  });
  root.append(svg('title', {}, 'Rank of each system under each evaluator (1 = best). Control cases on the right.'));
  const xOf = (i, isControl) => left + cell * i + (isControl ? gap : 0);
  const columns = [...primary.map((s) => [s, false]), ...controls.map((s) => [s, true])];
  columns.forEach(([s, isControl], i) => {
    const x = xOf(i, isControl) + cell / 2;
    root.append(
      text(x, top - 8, s, {
        transform: `rotate(-40 ${x} ${top - 8})`,
        'text-anchor': 'start',
        class: isControl ? 'control-label' : '',
      }),
    );
  });
  if (controls.length) {
    const x0 = xOf(primary.length, true);
    root.append(text(x0, 14, 'control cases', { fill: '#7a5195', 'font-weight': 600 }));
    root.append(
      svg('rect', {
        x: x0 - 4,
        y: top - 4,
        width: cell * controls.length + 8,
        height: rowH * m.rows.length + 8,
        fill: 'none',
        stroke: '#7a5195',
        'stroke-dasharray': '5 4',
        rx: 6,
      }),
    );
  }
  m.rows.forEach((row, r) => {
    const y = top + r * rowH;
    root.append(text(left - 10, y + rowH / 2 + 4, row, { 'text-anchor': 'end' }));
    columns.forEach(([s, isControl], i) => {
      const rank = cellAt(r, s)?.rank ?? null;
      const x = xOf(i, isControl);
      const g = svg('g', {});
      g.append(svg('title', {}, `${row} · ${s}: rank ${rank ?? '—'}, score ${fmt(cellAt(r, s)?.score)}`));
      g.append(
        svg('rect', {
          x: x + 2,
          y: y + 2,
          width: cell - 4,
          height: rowH - 4,
          rx: 4,
          fill: rank == null ? '#eef1f5' : rankColour(rank, worst),
        }),
      );
      const dark = rank != null && (rank - 1) / Math.max(1, worst - 1) < 0.5;
      g.append(
        text(x + cell / 2, y + rowH / 2 + 4, rank == null ? '—' : Number.isInteger(rank) ? rank : rank.toFixed(1), {
          'text-anchor': 'middle',
          fill: dark ? '#ffffff' : '#1b2430',
          'font-weight': 600,
        }),
      );
      root.append(g);
    });
  });
  return root;
}

/**
 * One row per system: the score as a dot with its interval as a whisker, best at the top.
 * @param {{name: string, score: number, lo?: number, hi?: number, control?: boolean}[]} items
 */
export function intervalChart(items, { label = 'score', min = 0, max = 1 } = {}) {
  const rowH = 26,
    left = Math.max(130, 7.5 * Math.max(...items.map((i) => i.name.length), 8)),
    plotW = 420,
    top = 24;
  const width = left + plotW + 70,
    height = top + rowH * items.length + 30;
  const x = (v) => left + ((v - min) / (max - min || 1)) * plotW;
  const root = svg('svg', {
    class: 'chart intervals',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: 'img',
    'aria-label': `${label} per system with intervals`,
  });
  for (let t = 0; t <= 4; t++) {
    const v = min + ((max - min) * t) / 4;
    root.append(svg('line', { x1: x(v), x2: x(v), y1: top - 6, y2: height - 24, class: 'grid-line' }));
    root.append(text(x(v), height - 8, fmt(v, 2), { 'text-anchor': 'middle', fill: '#5b6776' }));
  }
  items.forEach((it, i) => {
    const y = top + i * rowH + rowH / 2;
    const colour = it.control ? '#7a5195' : '#0b6e7f';
    root.append(text(left - 10, y + 4, it.name, { 'text-anchor': 'end', fill: it.control ? '#7a5195' : '#1b2430' }));
    if (Number.isFinite(it.lo) && Number.isFinite(it.hi)) {
      root.append(svg('line', { x1: x(it.lo), x2: x(it.hi), y1: y, y2: y, stroke: colour, 'stroke-width': 2 }));
      for (const v of [it.lo, it.hi])
        root.append(svg('line', { x1: x(v), x2: x(v), y1: y - 5, y2: y + 5, stroke: colour, 'stroke-width': 2 }));
    }
    if (Number.isFinite(it.score)) {
      root.append(
        svg('circle', {
          cx: x(it.score),
          cy: y,
          r: 5,
          fill: it.control ? '#ffffff' : colour,
          stroke: colour,
          'stroke-width': 2,
        }),
      );
      root.append(text(left + plotW + 12, y + 4, fmt(it.score), { fill: '#5b6776' }));
    }
  });
  return root;
}

/**
 * Grouped bars: mean NRP per model (group) and prompt (bar), with interval whiskers — the
 * layout of the NRP paper's Figure 1.
 * @param {{system: string, prompt: string, mean: number, lo?: number, hi?: number}[]} rows
 */
export function nrpBars(rows) {
  const systems = [...new Set(rows.map((r) => r.system))];
  const prompts = [...new Set(rows.map((r) => r.prompt))];
  const barW = 34,
    groupGap = 44,
    left = 50,
    top = 20,
    plotH = 240;
  const groupW = prompts.length * barW;
  const width = Math.max(left + systems.length * (groupW + groupGap) + 20, left + prompts.length * 190);
  const height = top + plotH + 70;
  const y = (v) => top + plotH - v * plotH;
  const root = svg('svg', {
    class: 'chart nrp',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: 'img',
    'aria-label': 'Mean NRP per model and prompt',
  });
  for (let t = 0; t <= 4; t++) {
    const v = t / 4;
    root.append(svg('line', { x1: left, x2: width - 10, y1: y(v), y2: y(v), class: 'grid-line' }));
    root.append(text(left - 8, y(v) + 4, v.toFixed(2), { 'text-anchor': 'end', fill: '#5b6776' }));
  }
  systems.forEach((s, gi) => {
    const gx = left + 10 + gi * (groupW + groupGap);
    root.append(text(gx + groupW / 2, top + plotH + 18, s, { 'text-anchor': 'middle' }));
    prompts.forEach((p, pi) => {
      const row = rows.find((r) => r.system === s && r.prompt === p);
      if (!row || !Number.isFinite(row.mean)) return;
      const x = gx + pi * barW;
      const g = svg('g', {});
      g.append(
        svg(
          'title',
          {},
          `${s} · ${p}: mean NRP ${fmt(row.mean)}${Number.isFinite(row.lo) ? ` [${fmt(row.lo)}, ${fmt(row.hi)}]` : ''}`,
        ),
      );
      g.append(
        svg('rect', {
          x: x + 2,
          y: y(row.mean),
          width: barW - 4,
          height: Math.max(0, plotH - (y(row.mean) - top)),
          fill: PALETTE[pi % PALETTE.length],
          rx: 2,
        }),
      );
      if (Number.isFinite(row.lo) && Number.isFinite(row.hi)) {
        g.append(
          svg('line', {
            x1: x + barW / 2,
            x2: x + barW / 2,
            y1: y(row.hi),
            y2: y(row.lo),
            stroke: '#1b2430',
            'stroke-width': 1.5,
          }),
        );
      }
      root.append(g);
    });
  });
  prompts.forEach((p, pi) => {
    const lx = left + pi * 190;
    root.append(
      svg('rect', { x: lx, y: height - 24, width: 12, height: 12, fill: PALETTE[pi % PALETTE.length], rx: 2 }),
    );
    root.append(text(lx + 18, height - 14, `prompt: ${p}`));
  });
  return root;
}

/**
 * A training curve: epochs on x, each series on its own 0-based y scale (train loss from 0
 * to its maximum, the dev metric that picks the epoch from 0 to 1, or on the loss scale when
 * that metric is the dev loss), drawn as lines with points, the best epoch marked. Redrawn
 * after every epoch.
 * @param {{epoch: number, train_loss: number, dev_metric: number}[]} curve
 * @param {{epochs?: number, best?: number, metric?: string}} options
 */
/** The training curve: train loss and the dev metric per epoch on an axis of the epochs asked
 *  for; `baseline` ({value, label}) draws what a model that learnt nothing scores on dev
 *  (the majority class or chance) as a flat line; `stopped` ({epoch, text}) marks where
 *  early stopping ended the training, the epochs after it shaded as not run. */
export function trainingCurve(
  curve,
  { epochs = curve.length, best = null, metric = 'accuracy', baseline = null, stopped = null } = {},
) {
  const left = 54,
    right = 54,
    top = 20,
    plotW = 420,
    plotH = 180;
  const width = left + plotW + right,
    height = top + plotH + 50;
  const n = Math.max(epochs, curve.length, 2);
  const x = (e) => left + ((e - 1) / (n - 1)) * plotW;
  const onLossScale = metric === 'loss';
  const maxLoss = Math.max(
    ...curve.map((c) => c.train_loss),
    ...(onLossScale ? curve.map((c) => c.dev_metric) : []),
    ...(onLossScale && baseline ? [baseline.value] : []),
    1e-9,
  );
  const yLoss = (v) => top + plotH - (v / maxLoss) * plotH;
  const yAcc = (v) => top + plotH - v * plotH;
  const root = svg('svg', {
    class: 'chart curve',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: 'img',
    'aria-label': `Training curve: train loss and dev ${metric} per epoch`,
  });
  root.append(svg('line', { x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH, stroke: '#888' }));
  for (let e = 1; e <= n; e++)
    root.append(text(x(e), top + plotH + 16, e, { 'text-anchor': 'middle', 'font-size': 11 }));
  root.append(text(left + plotW / 2, height - 8, 'epoch', { 'text-anchor': 'middle', 'font-size': 12 }));
  root.append(text(left - 6, top + 4, fmt(maxLoss, 2), { 'text-anchor': 'end', 'font-size': 11, fill: PALETTE[1] }));
  root.append(text(left - 6, top + plotH, '0', { 'text-anchor': 'end', 'font-size': 11, fill: PALETTE[1] }));
  if (!onLossScale) {
    root.append(text(left + plotW + 6, top + 4, '1', { 'font-size': 11, fill: PALETTE[0] }));
    root.append(text(left + plotW + 6, top + plotH, '0', { 'font-size': 11, fill: PALETTE[0] }));
  }
  const series = [
    ['train loss', (c) => yLoss(c.train_loss), PALETTE[1]],
    [`dev ${metric}`, (c) => (onLossScale ? yLoss(c.dev_metric) : yAcc(c.dev_metric)), PALETTE[0]],
  ];
  series.forEach(([name, y, colour], k) => {
    if (curve.length > 1)
      root.append(
        svg('polyline', {
          points: curve.map((c) => `${x(c.epoch)},${y(c)}`).join(' '),
          fill: 'none',
          stroke: colour,
          'stroke-width': 2,
        }),
      );
    for (const c of curve) root.append(svg('circle', { cx: x(c.epoch), cy: y(c), r: 3, fill: colour }));
    root.append(text(left + 10 + k * 130, top - 6, name, { 'font-size': 12, fill: colour }));
  });
  if (best != null)
    root.append(
      svg('line', {
        x1: x(best),
        x2: x(best),
        y1: top,
        y2: top + plotH,
        stroke: '#444',
        'stroke-dasharray': '4 3',
      }),
    );
  if (baseline) {
    const y = onLossScale ? yLoss(baseline.value) : yAcc(baseline.value);
    const line = svg('g', { class: 'baseline', 'data-value': baseline.value });
    line.append(
      svg('line', { x1: left, x2: left + plotW, y1: y, y2: y, stroke: PALETTE[0], 'stroke-dasharray': '2 4' }),
      text(left + plotW - 4, y - 4, `${baseline.label} ${fmt(baseline.value, 4)}`, {
        'text-anchor': 'end',
        'font-size': 11,
        fill: PALETTE[0],
      }),
    );
    root.append(line);
  }
  if (stopped) {
    const mark = svg('g', { class: 'stopped-early', 'data-epoch': stopped.epoch });
    if (stopped.epoch < n)
      mark.append(
        svg('rect', {
          x: x(stopped.epoch),
          y: top,
          width: x(n) - x(stopped.epoch),
          height: plotH,
          fill: '#888',
          'fill-opacity': 0.12,
        }),
      );
    mark.append(
      svg('line', { x1: x(stopped.epoch), x2: x(stopped.epoch), y1: top, y2: top + plotH + 4, stroke: '#b00' }),
      text(left, top + plotH + 30, stopped.text, { 'font-size': 11, fill: '#b00' }),
    );
    root.append(mark);
  }
  return root;
}
