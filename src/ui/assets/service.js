// A service's page (/service/<name>): its rate, errors and latency over the
// window, its operations, and its slowest traces.
import { api, errorNotice, settle } from './api.js';
import { lineChart } from './charts.js';
import { clear, h, link, loading, notice, queryParams, serviceColor } from './dom.js';
import { formatCount, formatMs, formatPercent, formatRate, lookbackMs, metricSeries, stepMsFor } from './model.js';
import { lookbackSelect, pageHeader, setQuery } from './nav.js';
import { traceTable } from './search.js';

export const name = 'service';
export const title = (service) => service;

const SLOW_TRACES = 10;

export async function render(main, service, ctx) {
  const q = queryParams();
  const lb = q.lookback || '1h';
  const windowMs = lookbackMs(lb);
  const endTs = Date.now();
  const from = endTs - windowMs;
  main.append(pageHeader(h('span', null, h('i', { class: 'swatch big', style: { background: serviceColor(service) } }), service),
    link(`/search?service=${encodeURIComponent(service)}&lookback=${lb}`, { class: 'button' }, 'Search traces'),
    lookbackSelect(lb, (v) => setQuery({ lookback: v }))));

  const tiles = h('div', { class: 'tiles' });
  const charts = h('div', { class: 'charts' }, loading('charts'));
  const ops = h('section', { class: 'panel' }, h('h2', null, 'Operations'), loading('operations'));
  const slow = h('section', { class: 'panel' }, h('h2', null, 'Slowest traces'), loading('traces'));
  main.append(tiles, charts, h('div', { class: 'two-col' }, ops, slow));

  const summaryP = api('/api/spanhouse/services/summary', { lookback: windowMs });
  await Promise.all([
    drawTiles(tiles, summaryP, service, ctx),
    drawCharts(charts, service, windowMs, endTs, from, ctx),
    drawOperations(ops, service, windowMs, lb, ctx),
    drawSlowTraces(slow, summaryP, service, endTs, from, ctx),
  ]);
}

async function drawTiles(el, summaryP, service, ctx) {
  const [res] = await settle([summaryP]);
  if (!ctx.alive()) return;
  if (!res.ok) {
    el.append(errorNotice(res.error, 'The service summary'));
    return;
  }
  const r = (res.value.data || []).find((x) => x.service === service);
  if (!r) {
    el.append(notice('info', `No spans from ${service} in this window.`));
    return;
  }
  const tile = (label, value, cls) => h('div', { class: ['tile', cls] }, h('div', { class: 'tile-value' }, value), h('div', { class: 'tile-label' }, label));
  el.append(tile('requests', formatRate(r.rate_per_s)), tile('errors', formatPercent(r.error_rate), r.error_rate > 0 ? 'err-text' : ''),
    tile('p50', formatMs(r.p50_ms)), tile('p95', formatMs(r.p95_ms)), tile('p99', formatMs(r.p99_ms)), tile('calls', formatCount(r.calls)));
}

async function drawCharts(el, service, windowMs, endTs, from, ctx) {
  const step = stepMsFor(windowMs);
  // ratePer = step: each point's rate covers its whole step (overview.js).
  const common = { service, endTs, lookback: windowMs, step, ratePer: step };
  const [calls, errors, p50, p95, p99] = await settle([
    api('/api/metrics/calls', common),
    api('/api/metrics/errors', common),
    api('/api/metrics/latencies', { ...common, quantile: 0.5 }),
    api('/api/metrics/latencies', { ...common, quantile: 0.95 }),
    api('/api/metrics/latencies', { ...common, quantile: 0.99 }),
  ]);
  if (!ctx.alive()) return;
  clear(el);
  const failed = [calls, errors, p50, p95, p99].find((x) => !x.ok);
  if (failed && failed.error.missing) {
    el.append(errorNotice(failed.error, 'The charts over time'));
    return;
  }
  const pts = (res) => (res.ok ? (metricSeries(res.value)[0] || { points: [] }).points : []);
  const opts = { from, to: endTs };
  const box = (res, chart) => (res.ok ? chart : errorNotice(res.error, 'This chart'));
  el.append(
    box(calls, lineChart([{ name: 'requests/s', color: '#3b82c4', points: pts(calls) }], { ...opts, title: 'Requests per second', yFormat: (v) => `${+v.toPrecision(3)}` })),
    box(errors, lineChart([{ name: 'error rate', color: '#d0453a', points: pts(errors).map(([t, v]) => [t, v * 100]) }], { ...opts, title: 'Errors (% of requests)', yFormat: (v) => `${+v.toPrecision(3)}%` })),
    box(p99, lineChart([
      { name: 'p50', color: '#5aa469', points: pts(p50) },
      { name: 'p95', color: '#e0a030', points: pts(p95) },
      { name: 'p99', color: '#c0504d', points: pts(p99) },
    ], { ...opts, title: 'Latency', yFormat: (v) => formatMs(v) })));
}

async function drawOperations(el, service, windowMs, lb, ctx) {
  const [sum, names] = await settle([
    // Every kind (internal and client spans too), each operation and kind a row.
    api(`/api/spanhouse/services/${encodeURIComponent(service)}/operations/summary`, { lookback: windowMs, spanKind: 'all' }),
    api('/api/operations', { service }),
  ]);
  if (!ctx.alive()) return;
  el.querySelector('.loading')?.remove();
  const opLink = (op) => link(`/search?service=${encodeURIComponent(service)}&operation=${encodeURIComponent(op)}&lookback=${lb}`, null, op);
  if (sum.ok) {
    const list = [...(sum.value.data || [])].sort((a, b) => (b.calls ?? 0) - (a.calls ?? 0));
    if (!list.length) {
      el.append(notice('info', 'No operations in this window.'));
      return;
    }
    el.append(h('div', { class: 'table-wrap' }, h('table', { class: 'grid-table ops-table' },
      h('thead', null, h('tr', null, ['Operation', 'Kind', 'Requests', 'Errors', 'p50', 'p95', 'p99', 'Calls'].map((c) => h('th', null, c)))),
      h('tbody', null, list.map((r) => h('tr', { dataset: { operation: r.operation } },
        h('td', null, opLink(r.operation)), h('td', { class: 'muted' }, r.span_kind || ''),
        h('td', { class: 'num' }, formatRate(r.rate_per_s)),
        h('td', { class: ['num', r.error_rate > 0 ? 'err-text' : ''] }, formatPercent(r.error_rate)),
        h('td', { class: 'num' }, formatMs(r.p50_ms)), h('td', { class: 'num' }, formatMs(r.p95_ms)),
        h('td', { class: 'num' }, formatMs(r.p99_ms)), h('td', { class: 'num' }, formatCount(r.calls))))))));
    return;
  }
  el.append(errorNotice(sum.error, 'Per-operation metrics'));
  if (names.ok) {
    el.append(h('ul', { class: 'plain-list' }, (names.value.data || []).map((o) => h('li', null, opLink(o.name), o.spanKind ? h('span', { class: 'muted' }, ` ${o.spanKind}`) : null))));
  } else if (!names.error.missing || !sum.error.missing) {
    el.append(errorNotice(names.error, 'The list of operations'));
  }
}

async function drawSlowTraces(el, summaryP, service, endTs, from, ctx) {
  // Traces with a span at or above (about) the service's p95 when known,
  // slowest first; 1% below it, so a trace at the p95 itself is not lost to
  // the quantile's estimate.
  const [sum] = await settle([summaryP]);
  const row = sum.ok ? (sum.value.data || []).find((x) => x.service === service) : null;
  const minDuration = row && row.p95_ms > 0 ? `${Math.floor(row.p95_ms * 990)}us` : undefined;
  const [res] = await settle([api('/api/traces', { service, start: from * 1000, end: endTs * 1000, minDuration, limit: 100 })]);
  if (!ctx.alive()) return;
  el.querySelector('.loading')?.remove();
  if (!res.ok) {
    el.append(errorNotice(res.error, 'Slowest traces'));
    return;
  }
  const traces = res.value.data || [];
  if (!traces.length) {
    el.append(notice('info', 'No traces in this window.'));
    return;
  }
  el.append(traceTable(traces, { limit: SLOW_TRACES, sortBy: 'duration', compact: true }));
}
