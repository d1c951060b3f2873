// Trace search (/search?service=&operation=&tags=&minDuration=&maxDuration=
// &lookback=&limit=): the form's state lives in the URL, so a search is a link.
import { api, errorNotice, peersNotice, samplingNotice, settle } from './api.js';
import { scatter } from './charts.js';
import { clear, formatTime, formatWhen, h, link, loading, notice, queryParams, serviceColor } from './dom.js';
import { LOOKBACKS, formatDurationUs, lookbackMs, parseDurationUs, parseTags, traceSummary } from './model.js';
import { navigate, pageHeader, setQuery } from './nav.js';

export const name = 'search';
export const title = () => 'Search';

const LIMITS = [20, 50, 100, 500];

// Search results as a table, newest first (or slowest first); `compact`
// leaves out the services column (a half-width panel).
export function traceTable(traces, { limit = Infinity, sortBy = 'start', compact = false } = {}) {
  const rows = traces.map(traceSummary);
  rows.sort(sortBy === 'duration' ? (a, b) => b.duration - a.duration : (a, b) => b.start - a.start);
  const heads = ['Trace', compact ? null : 'Services', 'Spans', 'Errors', 'Duration', 'Started'].filter(Boolean);
  return h('div', { class: 'table-wrap' }, h('table', { class: 'grid-table trace-table' },
    h('thead', null, h('tr', null, heads.map((c) => h('th', null, c)))),
    h('tbody', null, rows.slice(0, limit).map((r) => h('tr', { dataset: { traceId: r.traceID }, class: r.errors ? 'row-error' : '' },
      h('td', null, link(`/trace/${r.traceID}`, { class: 'trace-link' }, r.name), h('div', { class: 'mono muted small' }, r.traceID)),
      compact ? null : h('td', null, r.services.slice(0, 4).map(([s, n]) => h('span', { class: 'chip', style: { borderColor: serviceColor(s) } }, `${s} ${n}`)),
        r.services.length > 4 ? h('span', { class: 'muted' }, ` +${r.services.length - 4}`) : null),
      h('td', { class: 'num' }, String(r.spans)),
      h('td', { class: ['num', r.errors ? 'err-text' : ''] }, String(r.errors)),
      h('td', { class: 'num' }, formatDurationUs(r.duration)),
      h('td', { class: 'nowrap', title: formatTime(r.start / 1000) }, formatWhen(r.start / 1000)))))));
}

export async function render(main, _arg, ctx) {
  const q = queryParams();
  const lb = q.lookback || '1h';
  main.append(pageHeader('Search traces'));
  const form = h('form', { class: 'search-form', autocomplete: 'off' });
  const results = h('div', { class: 'search-results' });
  main.append(h('div', { class: 'search-layout' }, form, results));

  // Services and operations for the pickers; free text when unavailable.
  const [servicesRes, sampling] = await settle([api('/api/services'), samplingNotice()]);
  if (!ctx.alive()) return;
  if (sampling.ok && sampling.value) results.parentNode.before(sampling.value);
  const serviceField = servicesRes.ok
    ? h('select', { name: 'service' }, h('option', { value: '' }, '(choose a service)'),
      (servicesRes.value.data || []).slice().sort().map((s) => h('option', { value: s, selected: s === q.service }, s)))
    : h('input', { name: 'service', value: q.service || '', placeholder: 'service name' });
  const opField = h('select', { name: 'operation' }, h('option', { value: '' }, 'all operations'));
  const fillOps = async (service) => {
    clear(opField).append(h('option', { value: '' }, 'all operations'));
    if (!service) return;
    const [ops] = await settle([api('/api/operations', { service })]);
    if (!ops.ok) return;
    const seen = new Set();
    for (const o of (ops.value.data || []).map((x) => x.name).sort()) {
      if (seen.has(o)) continue;
      seen.add(o);
      opField.append(h('option', { value: o, selected: o === q.operation }, o));
    }
  };
  serviceField.addEventListener('change', () => fillOps(serviceField.value));
  const field = (label, input, hint) => h('label', { class: 'field' }, h('span', null, label), input, hint ? h('small', { class: 'muted' }, hint) : null);
  const tags = h('input', { name: 'tags', value: q.tags || '', placeholder: 'http.response.status_code=500 error=true' });
  const minD = h('input', { name: 'minDuration', value: q.minDuration || '', placeholder: 'e.g. 100ms' });
  const maxD = h('input', { name: 'maxDuration', value: q.maxDuration || '', placeholder: 'e.g. 2s' });
  const lookback = h('select', { name: 'lookback' }, LOOKBACKS.map(([n]) => h('option', { value: n, selected: n === lb }, `Last ${n}`)));
  const limit = h('select', { name: 'limit' }, LIMITS.map((n) => h('option', { value: n, selected: String(n) === (q.limit || '20') }, String(n))));
  const formError = h('div', { class: 'form-error', role: 'alert' });
  form.append(
    field('Service', serviceField),
    field('Operation', opField),
    field('Tags', tags, 'key=value, space-separated; a span or resource attribute'),
    h('div', { class: 'field-row' }, field('Min duration', minD), field('Max duration', maxD)),
    h('div', { class: 'field-row' }, field('Time', lookback), field('Limit', limit)),
    formError,
    h('button', { type: 'submit', class: 'primary' }, 'Find traces'));
  if (!servicesRes.ok) form.prepend(errorNotice(servicesRes.error, 'The service list'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const params = {
      service: serviceField.value.trim(), operation: opField.value, tags: tags.value.trim(),
      minDuration: minD.value.trim(), maxDuration: maxD.value.trim(), lookback: lookback.value, limit: limit.value,
    };
    const err = validate(params);
    formError.textContent = err;
    if (!err) setQuery(params);
  });
  fillOps(q.service);

  if (!q.service && !q.tags) {
    results.append(notice('info', 'Choose a service (and more, if you like), then Find traces.'));
    return;
  }
  const err = validate(q);
  if (err) {
    formError.textContent = err;
    return;
  }
  results.append(loading('traces'));
  const endTs = Date.now();
  const windowMs = lookbackMs(lb);
  const [res] = await settle([api('/api/traces', {
    service: q.service, operation: q.operation, tag: parseTags(q.tags).tags.map(([k, v]) => `${k}:${v}`),
    minDuration: q.minDuration, maxDuration: q.maxDuration,
    start: (endTs - windowMs) * 1000, end: endTs * 1000, limit: q.limit || 20,
  })]);
  if (!ctx.alive()) return;
  clear(results);
  if (!res.ok) {
    results.append(errorNotice(res.error, 'Trace search'));
    return;
  }
  const partial = peersNotice(res.value);
  if (partial) results.append(partial);
  const traces = res.value.data || [];
  results.dataset.count = String(traces.length);
  if (!traces.length) {
    results.append(notice('info', 'No traces match.', 'Widen the time window or drop a filter.'));
    return;
  }
  const sums = traces.map(traceSummary);
  results.append(
    h('div', { class: 'result-count' }, `${traces.length} trace${traces.length === 1 ? '' : 's'}`),
    scatter(sums.map((s) => ({
      t: s.start / 1000, v: s.duration, error: s.errors > 0,
      label: `${s.name} — ${formatDurationUs(s.duration)}, ${s.spans} spans`,
      onclick: () => navigate(`/trace/${s.traceID}`),
    })), { from: endTs - windowMs, to: endTs, yFormat: formatDurationUs }),
    traceTable(traces));
}

function validate(p) {
  for (const k of ['minDuration', 'maxDuration']) {
    if (p[k] && !Number.isFinite(parseDurationUs(p[k]))) return `${k}: '${p[k]}' is not a duration (like 250ms, 1.5s, 80us)`;
  }
  if (p.minDuration && p.maxDuration && parseDurationUs(p.minDuration) > parseDurationUs(p.maxDuration)) {
    return 'Min duration is above max duration';
  }
  const t = parseTags(p.tags);
  return t.error ? `Tags: ${t.error}` : '';
}
