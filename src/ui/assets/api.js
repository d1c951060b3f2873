// Calls to spanhouse's query API, with the query token when one is stored.
import { h, notice, qs } from './dom.js';

const TOKEN_KEY = 'spanhouse.queryToken';

export function getToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage disabled: the token lasts until the page is left */
  }
}

export class ApiError extends Error {
  constructor(status, message, path) {
    super(message);
    this.status = status;
    this.path = path;
    // The server has no such endpoint (an older spanhouse): its generic 404.
    this.missing = status === 404 && /^not found: \//.test(message);
  }
}

function endpointOf(url) {
  return url.split('?')[0];
}

// GET `path` (with `query`, an object) and parse the JSON; throws ApiError.
export async function api(path, query) {
  const url = path + qs(query || {});
  const headers = { Accept: 'application/json' };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp;
  try {
    resp = await fetch(url, { headers, cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, `cannot reach spanhouse (${e.message})`, endpointOf(url));
  }
  const text = await resp.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!resp.ok) {
    let msg = text.trim() || resp.statusText;
    if (body && Array.isArray(body.errors) && body.errors[0] && body.errors[0].msg) msg = body.errors[0].msg;
    const err = new ApiError(resp.status, msg, endpointOf(url));
    if (resp.status === 401) window.dispatchEvent(new CustomEvent('spanhouse:unauthorized'));
    throw err;
  }
  if (body === null) throw new ApiError(resp.status, 'the answer is not JSON', endpointOf(url));
  // Nodes of a `peers` list whose spans the answer lacks (down, or silent): peersNotice says so.
  const missing = resp.headers.get('X-Spanhouse-Peers-Missing');
  if (missing && typeof body === 'object') Object.defineProperty(body, 'peersMissing', { value: missing });
  return body;
}

// A notice naming the other nodes an answer could not include, or null.
export function peersNotice(body) {
  if (!body || !body.peersMissing) return null;
  const el = notice('warn', 'Spans that other spanhouse nodes hold may be missing here.',
    `Not included: ${body.peersMissing}. Stored spans are shown; the recent ones of those nodes are not.`);
  el.dataset.peersMissing = body.peersMissing;
  return el;
}

// A notice for a failed call, saying what the page could not show and why.
export function errorNotice(err, what) {
  if (err instanceof ApiError && err.missing) {
    const el = notice('missing', `${what} cannot be shown: this spanhouse does not serve ${err.path}.`,
      'It comes with the full query API; an older spanhouse has only /api/traces/{id}. ',
      'A trace can still be opened by its id (box at the top).');
    el.dataset.missing = err.path;
    return el;
  }
  if (err instanceof ApiError && err.status === 401) {
    return notice('warn', `${what}: this spanhouse wants a query token.`,
      'Enter one of its auth.query_tokens with the Token button at the top; it is kept in this browser.');
  }
  const status = err instanceof ApiError && err.status ? `HTTP ${err.status}: ` : '';
  return notice('error', `${what} failed.`, h('span', { class: 'mono' }, status + err.message));
}

// Runs the calls side by side; each result is {ok, value} or {ok: false, error}.
export function settle(promises) {
  return Promise.all(promises.map((p) => p.then((value) => ({ ok: true, value }), (error) => ({ ok: false, error }))));
}

// What share of traces sampling keeps, as a notice; null when everything is
// kept (or the server does not say).
export async function samplingNotice() {
  let s;
  try {
    s = (await api('/api/spanhouse/sampling')).data;
  } catch {
    return null;
  }
  const services = Object.entries(s.head.services || {}).filter(([, p]) => p < 1);
  const head = s.head.probability < 1 || services.length > 0;
  if (!head && !s.tail) return null;
  const pct = (p) => `${+(p * 100).toPrecision(3)}%`;
  const per = services.length ? ` (${services.map(([n, p]) => `${n}: ${pct(p)}`).join(', ')})` : '';
  const seen = s.keptShare == null ? '' : ` Since start, ${pct(s.keptShare)} of ${s.traces.kept + s.traces.dropped} traces were kept.`;
  const what = [];
  if (head) what.push(`${pct(s.head.probability)} of traces${per}`);
  if (s.tail) what.push(`${head ? 'of those, ' : ''}the traces these policies keep: ${s.tail.policies}`);
  return h('div', { class: 'sampling-note' }, notice('info', `Sampling keeps ${what.join('; ')}.`,
    `Only kept traces can be opened; rates, errors, latencies and dependencies count every span.${seen}`));
}
