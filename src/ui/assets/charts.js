// Hand-written SVG charts: a time-series line chart, a sparkline and a
// scatter plot. Each returns an element; sizes are in viewBox units and the
// SVG scales to its container's width.
import { h, svg, formatClock } from './dom.js';

export function niceTicks(lo, hi, count = 4) {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  // The top tick covers the highest value, so nothing is drawn above the plot.
  while (!ticks.length || ticks[ticks.length - 1] < hi) ticks.push(Number(((ticks.length ? ticks[ticks.length - 1] : lo) + step).toPrecision(12)));
  return ticks;
}

function timeTicks(from, to, count = 6) {
  const steps = [1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 5 * 60e3, 10 * 60e3, 15 * 60e3, 30 * 60e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3];
  const step = steps.find((s) => (to - from) / s <= count) || 86400e3;
  const offset = new Date(from).getTimezoneOffset() * 60e3;
  const ticks = [];
  for (let t = Math.ceil((from - offset) / step) * step + offset; t <= to; t += step) ticks.push(t);
  return { ticks, step };
}

// Labels near the plot's ends are anchored inward, so none is cut off.
function tickAnchor(px, left, right) {
  if (px < left + 18) return 'start';
  if (px > right - 18) return 'end';
  return 'middle';
}

function tickLabel(t, step) {
  if (step >= 86400e3) {
    const d = new Date(t);
    return `${d.getMonth() + 1}/${d.getDate()}`;
  }
  return formatClock(t, step < 60e3);
}

// series: [{name, color, points: [[ms, value]...]}]; opts: {from, to, yFormat,
// title, height, width, minY}. Empty series draw an empty chart saying so.
export function lineChart(series, opts) {
  const W = opts.width || 440;
  const H = opts.height || 170;
  const m = { l: 56, r: 12, t: 10, b: 22 };
  const from = opts.from;
  const to = opts.to;
  const all = series.flatMap((s) => s.points.map((p) => p[1]));
  const maxY = Math.max(opts.minY ?? 0, ...all, 0);
  const yt = niceTicks(0, maxY > 0 ? maxY : 1, 4);
  const yMax = yt[yt.length - 1] || 1;
  const x = (t) => m.l + ((t - from) / (to - from || 1)) * (W - m.l - m.r);
  const y = (v) => H - m.b - (v / yMax) * (H - m.t - m.b);
  const fmt = opts.yFormat || ((v) => String(v));

  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': opts.title || 'chart' });
  for (const v of yt) {
    root.append(svg('line', { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), class: 'grid' }));
    root.append(svg('text', { x: m.l - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, fmt(v)));
  }
  const { ticks, step } = timeTicks(from, to);
  for (const t of ticks) {
    root.append(svg('line', { x1: x(t), x2: x(t), y1: H - m.b, y2: H - m.b + 4, class: 'tick' }));
    root.append(svg('text', { x: x(t), y: H - 6, class: 'axis', 'text-anchor': tickAnchor(x(t), m.l, W - m.r) }, tickLabel(t, step)));
  }
  root.append(svg('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, class: 'baseline' }));
  if (!all.length) {
    root.append(svg('text', { x: (m.l + W - m.r) / 2, y: H / 2, class: 'empty', 'text-anchor': 'middle' }, 'no data in this window'));
  }
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join('');
    root.append(svg('path', { d, class: 'line', stroke: s.color, dataset: { series: s.name } }));
    if (s.points.length === 1) {
      root.append(svg('circle', { cx: x(s.points[0][0]), cy: y(s.points[0][1]), r: 2.5, fill: s.color }));
    }
  }
  // Hover: the nearest point of each series at the pointer's time.
  const cursor = svg('line', { y1: m.t, y2: H - m.b, class: 'cursor', visibility: 'hidden' });
  const tip = svg('text', { x: m.l + 4, y: m.t + 10, class: 'tip', visibility: 'hidden' });
  root.append(cursor, tip);
  root.addEventListener('mousemove', (ev) => {
    const r = root.getBoundingClientRect();
    const px = ((ev.clientX - r.left) / r.width) * W;
    if (px < m.l || px > W - m.r || !all.length) return;
    const t = from + ((px - m.l) / (W - m.l - m.r)) * (to - from);
    const parts = [];
    for (const s of series) {
      let best = null;
      for (const p of s.points) if (!best || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
      if (best) parts.push(`${s.name} ${fmt(best[1])}`);
    }
    cursor.setAttribute('x1', px);
    cursor.setAttribute('x2', px);
    cursor.setAttribute('visibility', 'visible');
    tip.textContent = `${formatClock(t)}  ${parts.join('  ')}`;
    tip.setAttribute('visibility', 'visible');
  });
  root.addEventListener('mouseleave', () => {
    cursor.setAttribute('visibility', 'hidden');
    tip.setAttribute('visibility', 'hidden');
  });

  const legend = series.length > 1
    ? h('div', { class: 'legend' }, series.map((s) => h('span', null, h('i', { style: { background: s.color } }), s.name)))
    : null;
  return h('figure', { class: 'chart-box' }, opts.title ? h('figcaption', null, opts.title) : null, root, legend);
}

// A small line without axes; `points` [[ms, value]...].
export function sparkline(points, opts = {}) {
  const W = opts.width || 120;
  const H = opts.height || 28;
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'spark', width: W, height: H });
  if (!points.length) {
    root.append(svg('line', { x1: 0, x2: W, y1: H - 1, y2: H - 1, class: 'spark-empty' }));
    return root;
  }
  const from = opts.from ?? points[0][0];
  const to = opts.to ?? points[points.length - 1][0];
  const maxV = Math.max(...points.map((p) => p[1])) || 1;
  const x = (t) => ((t - from) / (to - from || 1)) * (W - 2) + 1;
  const y = (v) => H - 2 - (v / maxV) * (H - 4);
  const d = points.map((p, i) => `${i ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join('');
  root.append(svg('path', { d, class: 'spark-line', stroke: opts.color || 'currentColor' }));
  // A lone point (one minute with traffic) has no line to draw.
  if (points.length === 1) root.append(svg('circle', { cx: x(points[0][0]), cy: y(points[0][1]), r: 2, fill: opts.color || 'currentColor' }));
  return root;
}

// Traces by start time (x) and duration (y); `points` [{t: ms, v: µs, error,
// label, onclick}]. y is linear from 0.
export function scatter(points, opts) {
  const W = opts.width || 900;
  const H = opts.height || 160;
  const m = { l: 64, r: 12, t: 10, b: 22 };
  // The results' own time span (padded), not the whole window: a search's
  // traces often come from a few seconds of it.
  const ts = points.map((p) => p.t);
  const pad = Math.max(1000, (Math.max(...ts) - Math.min(...ts)) * 0.05);
  const from = Math.max(opts.from, Math.min(...ts) - pad);
  const to = Math.min(opts.to, Math.max(...ts) + pad);
  const maxV = Math.max(1, ...points.map((p) => p.v));
  const yt = niceTicks(0, maxV, 3);
  const yMax = yt[yt.length - 1] || 1;
  const x = (t) => m.l + ((t - from) / (to - from || 1)) * (W - m.l - m.r);
  const y = (v) => H - m.b - (v / yMax) * (H - m.t - m.b);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart scatter', role: 'img', 'aria-label': 'traces by time and duration' });
  for (const v of yt) {
    root.append(svg('line', { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), class: 'grid' }));
    root.append(svg('text', { x: m.l - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, opts.yFormat(v)));
  }
  const { ticks, step } = timeTicks(from, to);
  for (const t of ticks) {
    root.append(svg('text', { x: x(t), y: H - 6, class: 'axis', 'text-anchor': tickAnchor(x(t), m.l, W - m.r) }, tickLabel(t, step)));
  }
  root.append(svg('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, class: 'baseline' }));
  for (const p of points) {
    const c = svg('circle', { cx: x(Math.min(Math.max(p.t, from), to)), cy: y(p.v), r: 4, class: p.error ? 'dot dot-error' : 'dot', onclick: p.onclick });
    c.append(svg('title', null, p.label));
    root.append(c);
  }
  return root;
}
