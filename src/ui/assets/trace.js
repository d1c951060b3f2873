// One trace (/trace/<id>): a waterfall of its spans nested by parent, each
// span's details on a click, errors in red, and the critical path.
import { api, errorNotice, peersNotice, settle } from './api.js';
import { clear, formatTime, h, link, loading, notice, serviceColor } from './dom.js';
import { buildTraceTree, criticalPath, formatDurationUs } from './model.js';
import { pageHeader } from './nav.js';

export const name = 'trace';
export const title = (id) => `Trace ${id.slice(0, 12)}`;

const INDENT_PX = 14;
const TICKS = 5;

export async function render(main, id, ctx) {
  main.append(loading('the trace'));
  const [res] = await settle([api(`/api/traces/${encodeURIComponent(id)}`)]);
  if (!ctx.alive()) return;
  clear(main);
  if (!res.ok) {
    if (res.error.status === 404 && !res.error.missing) {
      main.append(notice('warn', `Trace ${id} was not found.`,
        'Spans are stored within about a second of arriving; older ones than the retention are gone; or the id is wrong.'));
    } else {
      main.append(errorNotice(res.error, `Trace ${id}`));
    }
    return;
  }
  const partial = peersNotice(res.value);
  if (partial) main.append(partial);
  const trace = (res.value.data || [])[0];
  if (!trace || !(trace.spans || []).length) {
    main.append(notice('warn', `Trace ${id} has no spans.`));
    return;
  }
  drawTrace(main, trace);
}

function drawTrace(main, trace) {
  const tree = buildTraceTree(trace);
  const cp = criticalPath(tree);
  const dur = Math.max(tree.duration, 1);
  const rel = (us) => ((us - tree.start) / dur) * 100;

  const json = h('a', { class: 'button', href: '#', download: `trace-${trace.traceID}.json` }, 'JSON');
  json.addEventListener('click', () => {
    json.href = URL.createObjectURL(new Blob([JSON.stringify({ data: [trace] }, null, 2)], { type: 'application/json' }));
  });
  const cpToggle = h('input', { type: 'checkbox', checked: true, id: 'cp-toggle' });
  const waterfall = h('div', { class: 'waterfall show-cp', id: 'waterfall' });
  cpToggle.addEventListener('change', () => waterfall.classList.toggle('show-cp', cpToggle.checked));
  const collapseAll = h('button', { type: 'button' }, 'Collapse all');
  const expandAll = h('button', { type: 'button' }, 'Expand all');

  main.append(pageHeader(h('span', { class: 'trace-title' }, tree.rootName),
    h('label', { class: 'check' }, cpToggle, ' Critical path'), collapseAll, expandAll, json));
  main.append(h('div', { class: 'trace-meta' },
    meta('Trace', h('span', { class: 'mono', id: 'trace-id' }, trace.traceID)),
    meta('Started', formatTime(tree.start / 1000)),
    meta('Duration', h('span', { id: 'trace-duration' }, formatDurationUs(tree.duration))),
    meta('Spans', h('span', { id: 'trace-span-count' }, String(tree.nodes.length))),
    meta('Depth', String(tree.maxDepth + 1)),
    meta('Errors', h('span', { class: tree.errors ? 'err-text' : '' }, String(tree.errors))),
    meta('Services', h('span', null, [...tree.services.entries()].map(([s, n]) =>
      link(`/service/${encodeURIComponent(s)}`, { class: 'chip', style: { borderColor: serviceColor(s) } }, `${s} ${n}`))))));
  const orphans = tree.nodes.filter((n) => n.orphan).length;
  if (orphans) {
    main.append(notice('warn', `${orphans} span${orphans === 1 ? '' : 's'} name a parent that is not in this trace.`,
      'They are drawn as roots; the parent may not have arrived yet or was dropped.'));
  }

  // The ruler.
  const ruler = h('div', { class: 'span-track ruler' });
  for (let i = 0; i < TICKS; i++) {
    const pct = (i / (TICKS - 1)) * 100;
    ruler.append(h('div', { class: 'tick', style: { left: `${pct}%` } }, h('span', null, formatDurationUs((dur * i) / (TICKS - 1)))));
  }
  waterfall.append(h('div', { class: 'wf-head' }, h('div', { class: 'span-label' }, 'Service: operation'), ruler));

  // Rows, depth-first; a node's descendants follow it, so collapsing hides
  // the next `size - 1` rows.
  const rows = [];
  const size = new Map();
  for (let i = tree.nodes.length - 1; i >= 0; i--) {
    const n = tree.nodes[i];
    size.set(n.id, 1 + n.children.reduce((s, c) => s + (size.get(c.id) || 0), 0));
  }
  const collapsed = new Set();
  const applyCollapse = () => {
    let hideUntil = -1;
    tree.nodes.forEach((n, i) => {
      const hidden = i < hideUntil;
      rows[i].row.hidden = hidden;
      if (hidden) rows[i].detail.hidden = true;
      if (!hidden && collapsed.has(n.id)) hideUntil = i + size.get(n.id);
      rows[i].toggle.textContent = n.hasChildren ? (collapsed.has(n.id) ? '▸' : '▾') : '';
    });
  };

  const body = h('div', { class: 'wf-body' });
  tree.nodes.forEach((n) => {
    const span = n.span;
    const color = serviceColor(n.service);
    const left = rel(n.start);
    const width = (span.duration / dur) * 100;
    const toggle = h('span', { class: 'toggle', 'aria-hidden': 'true' });
    const bar = h('div', { class: 'span-bar', style: { left: `${left}%`, width: `${width}%`, background: n.error ? '' : color } });
    for (const [s, e] of cp.get(n.id) || []) {
      const spanDur = Math.max(span.duration, 1);
      bar.append(h('div', { class: 'cp-seg', style: { left: `${((s - n.start) / spanDur) * 100}%`, width: `${((e - s) / spanDur) * 100}%` } }));
    }
    const durLabel = h('span', { class: 'span-dur' }, formatDurationUs(span.duration));
    // The duration label sits right of the bar, else left of it, else (a bar
    // nearly as wide as the trace) inside its right end.
    if (left + width <= 80) Object.assign(durLabel.style, { left: `${left + width}%`, paddingLeft: '4px' });
    else if (left >= 12) Object.assign(durLabel.style, { right: `${100 - left}%`, paddingRight: '4px' });
    else {
      durLabel.classList.add('inside');
      Object.assign(durLabel.style, { right: `${100 - left - width}%`, paddingRight: '6px' });
    }
    const row = h('div', {
      class: ['span-row', n.error ? 'is-error' : '', cp.has(n.id) ? 'on-cp' : ''],
      tabindex: 0,
      dataset: {
        spanId: n.id, parentId: n.parentId, depth: String(n.depth), durationUs: String(span.duration),
        offsetUs: String(n.start - tree.start), service: n.service, operation: span.operationName,
        error: n.error ? 'true' : 'false', critical: cp.has(n.id) ? 'true' : 'false',
      },
    },
    h('div', { class: 'span-label', style: { paddingLeft: `${6 + n.depth * INDENT_PX}px` } },
      toggle, h('i', { class: 'svc-bar', style: { background: color } }),
      h('span', { class: 'svc' }, n.service), ' ',
      n.error ? h('span', { class: 'err-badge', title: 'error' }, '!') : null,
      h('span', { class: 'op' }, span.operationName)),
    h('div', { class: 'span-track' }, bar, durLabel));
    const detail = h('div', { class: 'span-detail', hidden: true });
    rows.push({ row, detail, toggle });
    toggle.addEventListener('click', (ev) => {
      ev.stopPropagation();
      if (!n.hasChildren) return;
      if (collapsed.has(n.id)) collapsed.delete(n.id);
      else collapsed.add(n.id);
      applyCollapse();
    });
    const open = () => {
      if (!detail.firstChild) detail.append(spanDetails(n, tree, trace, cp));
      detail.hidden = !detail.hidden;
      row.classList.toggle('open', !detail.hidden);
    };
    row.addEventListener('click', open);
    row.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' || ev.key === ' ') {
        ev.preventDefault();
        open();
      }
    });
    body.append(row, detail);
  });
  waterfall.append(body);
  main.append(waterfall);
  collapseAll.addEventListener('click', () => {
    tree.nodes.forEach((n) => n.hasChildren && n.depth > 0 && collapsed.add(n.id));
    applyCollapse();
  });
  expandAll.addEventListener('click', () => {
    collapsed.clear();
    applyCollapse();
  });
  applyCollapse();
}

function meta(label, value) {
  return h('div', { class: 'meta' }, h('span', { class: 'meta-label' }, label), value);
}

function valueText(tag) {
  return typeof tag.value === 'string' ? tag.value : JSON.stringify(tag.value);
}

function tagTable(tags, cls) {
  if (!tags || !tags.length) return h('div', { class: 'muted small' }, 'none');
  return h('table', { class: ['kv', cls] }, h('tbody', null, tags.map((t) => h('tr', {
    class: t.key === 'error' || t.key === 'otel.status_code' && t.value === 'ERROR' || t.key === 'otel.status_description' ? 'err-text' : '',
    dataset: { key: t.key },
  }, h('th', null, t.key), h('td', { class: 'mono', title: t.type }, valueText(t))))));
}

function spanDetails(n, tree, trace, cp) {
  const span = n.span;
  const process = (trace.processes || {})[span.processID] || { tags: [] };
  const kind = (span.tags || []).find((t) => t.key === 'span.kind');
  const status = (span.tags || []).find((t) => t.key === 'otel.status_code');
  const parent = n.parentId ? tree.byId.get(n.parentId) : null;
  const offset = (us) => `+${formatDurationUs(us - tree.start)}`;
  const links = (span.references || []).filter((r) => r.refType !== 'CHILD_OF' || r.spanID !== n.parentId);
  const segs = cp.get(n.id) || [];
  const cpUs = segs.reduce((s, [a, b]) => s + (b - a), 0);
  return h('div', { class: 'detail-grid' },
    h('div', { class: 'detail-facts' },
      fact('Service', n.service), fact('Operation', span.operationName),
      fact('Span id', h('span', { class: 'mono' }, n.id)),
      fact('Parent', parent ? `${parent.service}: ${parent.span.operationName}` : n.orphan ? 'not in this trace' : 'none (root)'),
      fact('Start', `${offset(n.start)} (${formatTime(n.start / 1000)})`),
      fact('Duration', formatDurationUs(span.duration)),
      fact('Kind', kind ? kind.value : 'unspecified'),
      fact('Status', h('span', { class: n.error ? 'err-text' : '' }, status ? status.value : 'unset')),
      segs.length ? fact('Critical path', formatDurationUs(cpUs)) : null),
    h('div', null, h('h3', null, 'Attributes'), tagTable(span.tags, 'span-tags')),
    h('div', null, h('h3', null, 'Resource'), tagTable(process.tags, 'process-tags')),
    h('div', null, h('h3', null, `Events (${(span.logs || []).length})`),
      (span.logs || []).length
        ? h('ul', { class: 'events' }, span.logs.map((l) => {
          const ev = (l.fields || []).find((f) => f.key === 'event');
          const isErr = ev && ev.value === 'exception';
          return h('li', { class: isErr ? 'err-text' : '' }, h('div', null, h('span', { class: 'mono muted' }, offset(l.timestamp)), ' ', h('strong', null, ev ? valueText(ev) : 'event')),
            tagTable((l.fields || []).filter((f) => f !== ev), 'event-fields'));
        }))
        : h('div', { class: 'muted small' }, 'none')),
    links.length ? h('div', null, h('h3', null, 'Links'), h('ul', { class: 'plain-list' }, links.map((r) => h('li', { class: 'mono' },
      `${r.refType} `, r.traceID !== trace.traceID ? link(`/trace/${r.traceID}`, null, `${r.traceID}/${r.spanID}`) : `span ${r.spanID}`)))) : null,
    (span.warnings || []).length ? h('div', null, h('h3', null, 'Warnings'), h('ul', { class: 'plain-list' }, span.warnings.map((w) => h('li', null, w)))) : null);
}

function fact(label, value) {
  return h('div', { class: 'fact' }, h('span', { class: 'meta-label' }, label), h('span', null, value));
}
