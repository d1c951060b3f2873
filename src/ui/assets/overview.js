// The services overview (/): per service its rate, error rate and latency
// percentiles over the window, with small charts of rate and p99.
import { api, errorNotice, samplingNotice, settle } from './api.js';
import { sparkline } from './charts.js';
import { clear, h, link, loading, notice, queryParams, serviceColor } from './dom.js';
import { formatCount, formatMs, formatPercent, formatRate, lookbackMs, metricSeries, stepMsFor } from './model.js';
import { lookbackSelect, pageHeader, setQuery } from './nav.js';

export const name = 'overview';
export const title = () => 'Services';

const COLUMNS = [
  ['service', 'Service', (r) => r.service],
  ['rate_per_s', 'Requests', (r) => formatRate(r.rate_per_s)],
  ['error_rate', 'Errors', (r) => formatPercent(r.error_rate)],
  ['p50_ms', 'p50', (r) => formatMs(r.p50_ms)],
  ['p95_ms', 'p95', (r) => formatMs(r.p95_ms)],
  ['p99_ms', 'p99', (r) => formatMs(r.p99_ms)],
  ['calls', 'Calls', (r) => formatCount(r.calls)],
];
const MAX_SPARK_SERVICES = 40;

export async function render(main, _arg, ctx) {
  const q = queryParams();
  const lb = q.lookback || '1h';
  const windowMs = lookbackMs(lb);
  main.append(pageHeader('Services', lookbackSelect(lb, (v) => setQuery({ lookback: v }))));
  const body = h('div', { class: 'overview' }, loading('services'));
  main.append(body);

  const [summary, names, sampling] = await settle([
    api('/api/spanhouse/services/summary', { lookback: windowMs }),
    api('/api/services'),
    samplingNotice(),
  ]);
  if (!ctx.alive()) return;
  clear(body);
  if (sampling.ok && sampling.value) body.append(sampling.value);
  const rows = new Map();
  if (summary.ok) {
    for (const r of summary.value.data || []) rows.set(r.service, { ...r });
  } else {
    body.append(errorNotice(summary.error, 'Service metrics (rate, errors, latency)'));
  }
  if (names.ok) {
    for (const s of names.value.data || []) if (!rows.has(s)) rows.set(s, { service: s, idle: true });
  } else if (!summary.ok) {
    body.append(errorNotice(names.error, 'The list of services'));
  }
  if (!summary.ok && !names.ok) return;
  if (!rows.size) {
    body.append(notice('info', 'No services yet.', 'Send spans to the OTLP/HTTP listener (README: "Send it spans"); they show here within a few seconds.'));
    return;
  }

  let sortKey = 'calls';
  let desc = true;
  const table = h('table', { class: 'grid-table services-table' });
  const sparks = new Map();
  const draw = () => {
    clear(table);
    const head = h('tr', null, COLUMNS.map(([key, label]) => h('th', {
      class: ['sortable', key === sortKey ? (desc ? 'sorted-desc' : 'sorted-asc') : ''],
      onclick: () => {
        desc = key === sortKey ? !desc : key !== 'service';
        sortKey = key;
        draw();
      },
    }, label)), h('th', null, 'Requests over time'), h('th', null, 'p99 over time'));
    table.append(h('thead', null, head));
    const list = [...rows.values()].sort((a, b) => {
      const x = a[sortKey];
      const y = b[sortKey];
      const c = typeof x === 'string' ? x.localeCompare(y) : (x ?? -1) - (y ?? -1);
      return desc ? -c : c;
    });
    const tbody = h('tbody');
    for (const r of list) {
      if (!sparks.has(r.service)) sparks.set(r.service, [h('td', { class: 'spark-cell' }), h('td', { class: 'spark-cell' })]);
      const [rateCell, p99Cell] = sparks.get(r.service);
      tbody.append(h('tr', { dataset: { service: r.service }, class: r.error_rate > 0.05 ? 'row-hot' : '' },
        h('td', null, h('i', { class: 'swatch', style: { background: serviceColor(r.service) } }),
          link(`/service/${encodeURIComponent(r.service)}?lookback=${lb}`, { class: 'service-link' }, r.service)),
        COLUMNS.slice(1).map(([key, , fmt]) => h('td', { class: ['num', key === 'error_rate' && r.error_rate > 0 ? 'err-text' : ''], dataset: { col: key } }, r.idle ? '–' : fmt(r))),
        rateCell, p99Cell));
    }
    table.append(tbody);
  };
  draw();
  const foot = h('div', { class: 'muted small' });
  body.append(h('div', { class: 'table-wrap' }, table), foot);
  await fillSparklines([...rows.values()].sort((a, b) => (b.calls ?? 0) - (a.calls ?? 0)).slice(0, MAX_SPARK_SERVICES), sparks, windowMs, foot, ctx);
}

async function fillSparklines(list, sparks, windowMs, foot, ctx) {
  const endTs = Date.now();
  const from = endTs - windowMs;
  const step = stepMsFor(windowMs);
  // ratePer (Jaeger: the window each rate is taken over) = step: every
  // point covers its own step, none is left out between points.
  const common = { endTs, lookback: windowMs, step, ratePer: step };
  let missing = null;
  let i = 0;
  const worker = async () => {
    while (i < list.length && !missing) {
      const r = list[i++];
      const [calls, p99] = await settle([
        api('/api/metrics/calls', { service: r.service, ...common }),
        api('/api/metrics/latencies', { service: r.service, quantile: 0.99, ...common }),
      ]);
      if (!ctx.alive()) return;
      const failed = [calls, p99].find((x) => !x.ok);
      if (failed && failed.error.missing) {
        missing = failed.error;
        return;
      }
      const [rateCell, p99Cell] = sparks.get(r.service);
      const color = serviceColor(r.service);
      const put = (cell, res, unit) => {
        clear(cell);
        if (!res.ok) {
          cell.append(h('span', { class: 'muted', title: res.error.message }, '–'));
          return;
        }
        const pts = (metricSeries(res.value)[0] || { points: [] }).points;
        cell.append(sparkline(pts, { from, to: endTs, color }));
        cell.title = unit;
      };
      put(rateCell, calls, 'requests per second');
      put(p99Cell, p99, 'p99 latency (ms)');
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  if (missing && ctx.alive()) {
    foot.append(errorNotice(missing, 'The small charts'));
  }
}
