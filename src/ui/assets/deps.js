// The service dependency graph (/dependencies): who calls whom in the window,
// laid out in layers left to right, edges labelled with their call counts.
import { api, errorNotice, settle } from './api.js';
import { clear, h, loading, notice, queryParams, serviceColor, svg } from './dom.js';
import { formatCount, layoutGraph, lookbackMs } from './model.js';
import { lookbackSelect, navigate, pageHeader, setQuery } from './nav.js';

export const name = 'dependencies';
export const title = () => 'Dependencies';

const NODE_W = 170;
const NODE_H = 34;
const GAP_X = 110;
const GAP_Y = 26;

export async function render(main, _arg, ctx) {
  const q = queryParams();
  const lb = q.lookback || '1h';
  const windowMs = lookbackMs(lb);
  main.append(pageHeader('Service dependencies', lookbackSelect(lb, (v) => setQuery({ lookback: v }))));
  const body = h('div', { class: 'deps' }, loading('dependencies'));
  main.append(body);
  const [res] = await settle([api('/api/dependencies', { endTs: Date.now(), lookback: windowMs })]);
  if (!ctx.alive()) return;
  clear(body);
  if (!res.ok) {
    body.append(errorNotice(res.error, 'The dependency graph'));
    return;
  }
  // Edges may repeat (per minute or per source); add them up.
  const sum = new Map();
  for (const e of res.value.data || []) {
    const key = `${e.parent}\u0000${e.child}`;
    const prev = sum.get(key) || { parent: e.parent, child: e.child, callCount: 0 };
    prev.callCount += Number(e.callCount) || 0;
    sum.set(key, prev);
  }
  const edges = [...sum.values()];
  if (!edges.length) {
    body.append(notice('info', 'No calls between services in this window.',
      'Edges are computed a couple of minutes behind real time from client spans and their children in other services.'));
    return;
  }
  body.append(graph(edges));
  body.append(h('div', { class: 'table-wrap' }, h('table', { class: 'grid-table deps-table' },
    h('thead', null, h('tr', null, ['Caller', 'Callee', 'Calls'].map((c) => h('th', null, c)))),
    h('tbody', null, edges.sort((a, b) => b.callCount - a.callCount).map((e) => h('tr', { dataset: { parent: e.parent, child: e.child } },
      h('td', null, e.parent), h('td', null, e.child), h('td', { class: 'num' }, formatCount(e.callCount))))))));
}

function graph(edges) {
  const names = [...new Set(edges.flatMap((e) => [e.parent, e.child]))];
  const { layers, pos } = layoutGraph(names, edges);
  const tallest = Math.max(...layers.map((l) => l.length));
  const W = layers.length * NODE_W + (layers.length - 1) * GAP_X + 40;
  const H = tallest * NODE_H + (tallest - 1) * GAP_Y + 40 + GAP_Y;  // room for arcs below
  const xy = (n) => {
    const p = pos.get(n);
    const col = layers[p.layer].length;
    const offset = ((tallest - col) * (NODE_H + GAP_Y)) / 2;
    return { x: 20 + p.layer * (NODE_W + GAP_X), y: 20 + offset + p.index * (NODE_H + GAP_Y) };
  };
  const maxCalls = Math.max(...edges.map((e) => e.callCount), 1);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'dep-graph', role: 'img', 'aria-label': 'service dependency graph' });
  root.style.maxWidth = `${W}px`;
  root.append(svg('defs', null, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' },
    svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' }))));
  for (const e of edges) {
    const a = xy(e.parent);
    const b = xy(e.child);
    const width = 1 + 3 * Math.sqrt(e.callCount / maxCalls);
    let d;
    let lx;
    let ly;
    if (pos.get(e.child).layer > pos.get(e.parent).layer) {
      const x1 = a.x + NODE_W;
      const y1 = a.y + NODE_H / 2;
      const x2 = b.x;
      const y2 = b.y + NODE_H / 2;
      const mx = (x1 + x2) / 2;
      d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
      lx = mx;
      ly = (y1 + y2) / 2 - 4;
    } else {
      // A call back to an earlier (or the same) layer: an arc below the nodes.
      const x1 = a.x + NODE_W / 2;
      const y1 = a.y + NODE_H;
      const x2 = b.x + NODE_W / 2;
      const y2 = b.y + NODE_H;
      const dip = Math.max(y1, y2) + GAP_Y;
      d = `M${x1},${y1} C${x1},${dip} ${x2},${dip} ${x2},${y2}`;
      lx = (x1 + x2) / 2;
      ly = dip - 2;
    }
    const g = svg('g', { class: 'edge', dataset: { parent: e.parent, child: e.child } },
      svg('path', { d, 'stroke-width': width.toFixed(2), 'marker-end': 'url(#arrow)' }),
      svg('text', { x: lx, y: ly, 'text-anchor': 'middle' }, formatCount(e.callCount)));
    g.append(svg('title', null, `${e.parent} → ${e.child}: ${e.callCount} calls`));
    root.append(g);
  }
  for (const n of names) {
    const { x, y } = xy(n);
    const label = n.length > 22 ? `${n.slice(0, 21)}…` : n;
    const g = svg('g', { class: 'node', dataset: { service: n }, onclick: () => navigate(`/service/${encodeURIComponent(n)}`) },
      svg('rect', { x, y, width: NODE_W, height: NODE_H, rx: 6 }),
      svg('rect', { x, y, width: 6, height: NODE_H, rx: 2, fill: serviceColor(n), class: 'node-color' }),
      svg('text', { x: x + 14, y: y + NODE_H / 2 + 4 }, label));
    g.append(svg('title', null, n));
    root.append(g);
  }
  return h('div', { class: 'graph-wrap' }, root);
}
