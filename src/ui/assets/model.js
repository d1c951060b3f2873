// Pure functions over the API's data: no DOM, so node can test them
// (tests/ui/model.test.mjs). Times in a Jaeger trace are microseconds.

// ---------- durations and numbers ----------

const DURATION_UNITS = { ns: 0.001, us: 1, µs: 1, ms: 1000, s: 1e6, m: 60e6, h: 3600e6 };

// "1.5s", "250ms", "80us", "2m" -> microseconds; NaN when it is not one.
export function parseDurationUs(text) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h)\s*$/.exec(String(text ?? ''));
  if (!m) return NaN;
  return Number(m[1]) * DURATION_UNITS[m[2]];
}

// Microseconds as people read them: 850µs, 12.35ms, 1.24s, 2m 5s.
export function formatDurationUs(us) {
  if (!Number.isFinite(us)) return '–';
  if (us < 1000) return `${Math.round(us)}µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(2)}ms`;
  if (us < 60e6) return `${(us / 1e6).toFixed(2)}s`;
  const m = Math.floor(us / 60e6);
  return `${m}m ${Math.round((us - m * 60e6) / 1e6)}s`;
}

export function formatMs(ms) {
  return Number.isFinite(ms) ? formatDurationUs(ms * 1000) : '–';
}

export function formatRate(perS) {
  if (!Number.isFinite(perS)) return '–';
  if (perS === 0) return '0/s';
  if (perS < 0.1) return `${(perS * 60).toFixed(2)}/min`;
  if (perS < 100) return `${perS.toFixed(2)}/s`;
  return `${Math.round(perS)}/s`;
}

// A fraction (0..1) as a percentage.
export function formatPercent(fraction) {
  if (!Number.isFinite(fraction)) return '–';
  const p = fraction * 100;
  if (p === 0) return '0%';
  if (p < 0.01) return '<0.01%';
  return `${p < 10 ? p.toFixed(2) : p.toFixed(1)}%`;
}

export function formatCount(n) {
  if (!Number.isFinite(n)) return '–';
  if (n < 1e4) return String(Math.round(n));
  if (n < 1e6) return `${(n / 1e3).toFixed(1)}k`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)}M`;
  return `${(n / 1e9).toFixed(1)}G`;
}

// ---------- time ranges ----------

export const LOOKBACKS = [
  ['5m', 5 * 60e3], ['15m', 15 * 60e3], ['1h', 3600e3], ['6h', 6 * 3600e3],
  ['12h', 12 * 3600e3], ['24h', 24 * 3600e3], ['2d', 2 * 86400e3], ['7d', 7 * 86400e3],
];

export function lookbackMs(name, fallback = '1h') {
  const hit = LOOKBACKS.find(([n]) => n === name) || LOOKBACKS.find(([n]) => n === fallback);
  return hit[1];
}

// A chart step for a window: about 60 points, whole minutes (the per-minute
// RED view is the finest the store keeps).
export function stepMsFor(windowMs) {
  const minute = 60e3;
  return Math.max(minute, Math.ceil(windowMs / 60 / minute) * minute);
}

// A metric point's timestamp as epoch ms: protobuf JSON gives RFC 3339 text;
// numbers are read by their size (s, ms or µs).
export function timestampMs(ts) {
  if (typeof ts === 'string' && !/^\d+$/.test(ts)) return Date.parse(ts);
  const n = Number(ts);
  if (!Number.isFinite(n)) return NaN;
  if (n > 1e14) return n / 1000;
  if (n > 1e11) return n;
  return n * 1000;
}

// Jaeger's metricsquery JSON -> [{labels: {name: value}, points: [[ms, value]]}].
// Points without a finite value (NaN as "NaN") are left out.
export function metricSeries(doc) {
  const out = [];
  for (const m of (doc && doc.metrics) || []) {
    const labels = {};
    for (const l of m.labels || []) labels[l.name] = l.value;
    const points = [];
    for (const p of m.metricPoints || []) {
      const v = Number(p.gaugeValue ? p.gaugeValue.doubleValue : p.value);
      const t = timestampMs(p.timestamp);
      if (Number.isFinite(v) && Number.isFinite(t)) points.push([t, v]);
    }
    points.sort((a, b) => a[0] - b[0]);
    out.push({ labels, points });
  }
  return out;
}

// ---------- tags ----------

// `http.status_code=500 error=true name="a b"` -> [['http.status_code','500'], ...].
// Returns {tags, error}; error names the first token that is not key=value.
export function parseTags(text) {
  const tags = [];
  const re = /\s*([^\s=]+)=("((?:[^"\\]|\\.)*)"|\S*)/y;
  let s = String(text ?? '').trim();
  let i = 0;
  while (i < s.length) {
    re.lastIndex = i;
    const m = re.exec(s);
    if (!m) {
      const bad = s.slice(i).trim().split(/\s+/)[0];
      return { tags, error: `'${bad}' is not key=value` };
    }
    const value = m[3] !== undefined ? m[3].replace(/\\(.)/g, '$1') : m[2];
    tags.push([m[1], value]);
    i = re.lastIndex;
    while (i < s.length && /\s/.test(s[i])) i++;
  }
  return { tags, error: '' };
}

export function tagValue(tags, key) {
  const t = (tags || []).find((x) => x.key === key);
  return t ? t.value : undefined;
}

export function spanIsError(span) {
  const e = tagValue(span.tags, 'error');
  return e === true || e === 'true' || tagValue(span.tags, 'otel.status_code') === 'ERROR';
}

// ---------- traces ----------

// One Jaeger trace as a tree: nodes in display order (depth-first, children by
// start time), each {span, id, parentId, depth, children, service, start, end,
// error, hasChildren}; plus the trace's start, end and duration. A span whose
// CHILD_OF parent is not in the trace is a root (`orphan` set). Cycles cannot
// hang it: a span is placed once.
export function buildTraceTree(trace) {
  const spans = trace.spans || [];
  const processes = trace.processes || {};
  const byId = new Map();
  for (const span of spans) {
    if (byId.has(span.spanID)) continue;  // a repeated span id: first one wins
    byId.set(span.spanID, {
      span,
      id: span.spanID,
      parentId: '',
      orphan: false,
      depth: 0,
      children: [],
      service: (processes[span.processID] || {}).serviceName || 'unknown',
      start: span.startTime,
      end: span.startTime + span.duration,
      error: spanIsError(span),
    });
  }
  const roots = [];
  for (const node of byId.values()) {
    const ref = (node.span.references || []).find((r) => r.refType === 'CHILD_OF');
    if (ref && ref.spanID !== node.id && byId.has(ref.spanID)) {
      node.parentId = ref.spanID;
      byId.get(ref.spanID).children.push(node);
    } else {
      node.orphan = Boolean(ref);
      roots.push(node);
    }
  }
  const byStart = (a, b) => a.start - b.start || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  roots.sort(byStart);
  for (const node of byId.values()) node.children.sort(byStart);

  const ordered = [];
  const placed = new Set();
  const walk = (root) => {
    const stack = [[root, 0]];
    while (stack.length) {
      const [node, depth] = stack.pop();
      if (placed.has(node.id)) continue;
      placed.add(node.id);
      node.depth = depth;
      ordered.push(node);
      for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i], depth + 1]);
    }
  };
  roots.forEach(walk);
  // Spans caught in a parent cycle are reached from no root: show them as roots.
  for (const node of byId.values()) {
    if (!placed.has(node.id)) {
      node.parentId = '';
      walk(node);
    }
  }
  for (const node of ordered) node.hasChildren = node.children.length > 0;

  let start = Infinity;
  let end = -Infinity;
  for (const node of ordered) {
    start = Math.min(start, node.start);
    end = Math.max(end, node.end);
  }
  if (!ordered.length) start = end = 0;
  const services = new Map();
  for (const node of ordered) services.set(node.service, (services.get(node.service) || 0) + 1);
  const root = roots[0] || ordered[0];
  return {
    traceID: trace.traceID,
    nodes: ordered,
    byId,
    roots,
    start,
    end,
    duration: end - start,
    services,
    maxDepth: ordered.reduce((d, n) => Math.max(d, n.depth), 0),
    errors: ordered.filter((n) => n.error).length,
    rootName: root ? `${root.service}: ${root.span.operationName}` : '(no spans)',
  };
}

// The critical path as Jaeger's UI defines it: from a span's end, walk back
// through the child that finished last before that point; time no child
// covers is the span's own. Children are first clipped to their parent's
// time. Returns Map spanID -> [[start, end], ...] (µs, absolute), following
// the first root (the other roots' spans are not on it).
export function criticalPath(tree) {
  const path = new Map();
  const root = tree.roots[0];
  if (!root) return path;
  const add = (id, s, e) => {
    if (e <= s) return;
    if (!path.has(id)) path.set(id, []);
    path.get(id).push([s, e]);
  };
  // Explicit stack instead of recursion: deep traces stay safe.
  // A frame: the node's part of the path lies in [lo, hi] and is walked back
  // from t.
  const clipped = (node, lo, hi) =>
    node.children
      .map((c) => ({ c, s: Math.max(c.start, lo), e: Math.min(c.end, hi) }))
      .filter((x) => x.e > x.s);
  const frame = (node, lo, hi) => ({ node, lo, hi, t: hi, fromEnd: true, kids: null });
  const stack = [frame(root, root.start, root.end)];
  while (stack.length) {
    const f = stack[stack.length - 1];
    if (!f.kids) f.kids = clipped(f.node, f.lo, f.hi);
    // The child that ended last, strictly before t.
    let best = null;
    for (const k of f.kids) {
      // From the span's own end any child counts; after a child, only those
      // that ended before it started (overlapping ones ran in parallel).
      if (f.fromEnd ? k.e <= f.t : k.e < f.t) {
        if (!best || k.e > best.e || (k.e === best.e && k.s > best.s)) best = k;
      }
    }
    if (!best || f.t <= f.lo) {
      add(f.node.id, f.lo, f.t);
      stack.pop();
      continue;
    }
    add(f.node.id, best.e, f.t);
    f.t = best.s;
    f.fromEnd = false;
    f.kids = f.kids.filter((k) => k !== best);
    stack.push(frame(best.c, best.s, best.e));
  }
  for (const segs of path.values()) segs.sort((a, b) => a[0] - b[0]);
  return path;
}

// A search result's summary line.
export function traceSummary(trace) {
  const tree = buildTraceTree(trace);
  return {
    traceID: trace.traceID,
    name: tree.rootName,
    start: tree.start,
    duration: tree.duration,
    spans: tree.nodes.length,
    errors: tree.errors,
    services: [...tree.services.entries()].sort((a, b) => b[1] - a[1]),
  };
}

// ---------- dependency graph ----------

// Layers for a directed graph, left to right: a node's layer is the longest
// path to it from a node nothing calls, edges that close a cycle left out;
// within a layer, nodes are ordered by the mean position of their callers
// (a few sweeps). Returns {layers: [[name...]...], pos: Map name -> {layer, index}}.
export function layoutGraph(names, edges) {
  const out = new Map(names.map((n) => [n, []]));
  const inc = new Map(names.map((n) => [n, []]));
  for (const e of edges) {
    if (!out.has(e.parent) || !out.has(e.child) || e.parent === e.child) continue;
    out.get(e.parent).push(e.child);
    inc.get(e.child).push(e.parent);
  }
  // Depth-first from every node (callers first) marks back edges.
  const state = new Map();
  const back = new Set();
  const sorted = [...names].sort((a, b) => inc.get(a).length - inc.get(b).length || a.localeCompare(b));
  for (const start of sorted) {
    if (state.get(start)) continue;
    const stack = [[start, 0]];
    state.set(start, 1);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const kids = out.get(top[0]);
      if (top[1] >= kids.length) {
        state.set(top[0], 2);
        stack.pop();
        continue;
      }
      const next = kids[top[1]++];
      const st = state.get(next) || 0;
      if (st === 1) back.add(`${top[0]}\u0000${next}`);
      else if (st === 0) {
        state.set(next, 1);
        stack.push([next, 0]);
      }
    }
  }
  const fwd = (a) => out.get(a).filter((b) => !back.has(`${a}\u0000${b}`));
  // Longest path by Kahn's order over the forward edges.
  const indeg = new Map(names.map((n) => [n, 0]));
  for (const n of names) for (const m of fwd(n)) indeg.set(m, indeg.get(m) + 1);
  const layer = new Map(names.map((n) => [n, 0]));
  const queue = names.filter((n) => indeg.get(n) === 0).sort();
  while (queue.length) {
    const n = queue.shift();
    for (const m of fwd(n)) {
      layer.set(m, Math.max(layer.get(m), layer.get(n) + 1));
      indeg.set(m, indeg.get(m) - 1);
      if (indeg.get(m) === 0) queue.push(m);
    }
  }
  const layers = [];
  for (const n of [...names].sort()) {
    const l = layer.get(n);
    while (layers.length <= l) layers.push([]);
    layers[l].push(n);
  }
  const pos = new Map();
  const index = () => layers.forEach((ns, l) => ns.forEach((n, i) => pos.set(n, { layer: l, index: i })));
  index();
  for (let sweep = 0; sweep < 4; sweep++) {
    for (let l = 1; l < layers.length; l++) {
      const bary = (n) => {
        const ps = inc.get(n).filter((p) => pos.get(p).layer < l);
        return ps.length ? ps.reduce((s, p) => s + pos.get(p).index, 0) / ps.length : pos.get(n).index;
      };
      const keyed = layers[l].map((n) => [bary(n), n]);
      keyed.sort((a, b) => a[0] - b[0] || a[1].localeCompare(b[1]));
      layers[l] = keyed.map((k) => k[1]);
      index();
    }
  }
  return { layers, pos };
}
